#!/usr/bin/env bash
# Builds the Debian package: a release build installed under /usr, packed by
# CPack into build-deb/hmpmd_<version>_<arch>.deb. Tests and benchmarks are
# left out of this build. Usage: deploy/build-deb.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${HMPMD_DEB_BUILD_DIR:-build-deb}
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr -DHMPMD_BUILD_TESTS=OFF -DHMPMD_BUILD_BENCHMARKS=OFF \
  "${launcher[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "${HMPMD_JOBS:-2}"
(cd "$build_dir" && cpack -G DEB >/dev/null)
ls "$build_dir"/*.deb
