#!/usr/bin/env bash
# The README's second command: install what is missing, build, run every test.
# Sanitizers: in CI (CI=true) TSan runs the threaded and socket tests too.
# HMPMD_SANITIZERS=1 adds ASan+UBSan over every C++ test: a second full
# build (about 15 min on 2 cores), outside CI's time budget, so run before
# landing; HMPMD_SANITIZERS=0 skips both.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# CI builds at -O1: 0.77 of -O2's compile CPU, and CI runs no figure that
# needs -O2 (benchmarks run their smoke modes only). Given every time, so
# that a build directory configured by one mode is set back by the other.
werror=OFF opt=-O2
if [ "${CI:-}" = "true" ]; then werror=ON opt=-O1; fi
scripts/build.sh -DHMPMD_WERROR=$werror "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt -g -DNDEBUG"
ctest --test-dir build --output-on-failure -j 2 --timeout 300
# libFuzzer harnesses (clang, with ASan+UBSan): bounded runs over tests/fuzz_corpus/.
scripts/fuzz.sh
case "${HMPMD_SANITIZERS:-}" in
  1 | true) scripts/sanitizers.sh asan tsan ;;
  0 | false) ;;
  *) if [ "${CI:-}" = "true" ]; then scripts/sanitizers.sh tsan; fi ;;
esac
