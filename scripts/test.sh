#!/usr/bin/env bash
# The README's second command: install what is missing, build, run every test.
# In CI (CI=true, or HMPMD_SANITIZERS=1) the suite also runs under ASan+UBSan
# and, for the threaded and socket tests, TSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
werror=OFF
if [ "${CI:-}" = "true" ]; then werror=ON; fi
scripts/build.sh -DHMPMD_WERROR=$werror
ctest --test-dir build --output-on-failure -j 2 --timeout 300
# libFuzzer harnesses (clang): bounded runs over tests/fuzz_corpus/.
scripts/fuzz.sh
if [ "${HMPMD_SANITIZERS:-${CI:-}}" = "true" ] || [ "${HMPMD_SANITIZERS:-}" = "1" ]; then
  scripts/sanitizers.sh asan tsan
fi
