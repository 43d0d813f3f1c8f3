#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang in fuzz-build/ and runs each for
# a bounded number of inputs, starting from (and adding nothing to) the
# regression corpus in tests/fuzz_corpus/<harness>/. A crash fails the
# script; its input is left in fuzz-build/artifacts/ to be fixed and then
# kept in the corpus. Usage: scripts/fuzz.sh [RUNS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100000}
seconds=${2:-60}
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B fuzz-build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DHMPMD_BUILD_FUZZERS=ON "${launcher[@]}" >/dev/null
cmake --build fuzz-build -j "${HMPMD_JOBS:-2}" --target protocol_decoder_fuzzer job_spec_fuzzer
mkdir -p fuzz-build/artifacts
for f in protocol_decoder job_spec; do
  work=fuzz-build/corpus/$f
  rm -rf "$work" && mkdir -p "$work"
  echo "fuzz: $f: $runs runs or ${seconds}s"
  # New inputs go to a scratch dir; the checked-in corpus is only read.
  ASAN_OPTIONS=detect_leaks=1 "fuzz-build/bin/${f}_fuzzer" "$work" "tests/fuzz_corpus/$f" \
    -runs="$runs" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
    -artifact_prefix=fuzz-build/artifacts/ -print_final_stats=1 2>&1 | tail -n 12
done
