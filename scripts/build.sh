#!/usr/bin/env bash
# Configures and builds into build/ (or $HMPMD_BUILD_DIR) with two jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${HMPMD_BUILD_DIR:-build}
launcher=()
# ccache, when present, makes rebuilds after a checkout or a clean cheap.
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "${HMPMD_JOBS:-2}"
