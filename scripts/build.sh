#!/usr/bin/env bash
# Configures and builds into build/ (or $HMPMD_BUILD_DIR) with two jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${HMPMD_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build_dir" -j "${HMPMD_JOBS:-2}"
