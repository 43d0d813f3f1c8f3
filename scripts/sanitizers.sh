#!/usr/bin/env bash
# Runs the test suite under the sanitizer presets of CMakePresets.json:
#   asan: ASan+UBSan over every C++ test binary (not the Python-driven
#         end-to-end tests, the benchmark smokes or the install test, which
#         the plain build already runs and which would only rebuild the same
#         processes under ASan more slowly);
#   tsan: TSan over the tests that exercise threads and sockets (the HTTP
#         server and client, the worker's loop and lanes, live clusters).
# A sanitizer report fails the run. Usage: scripts/sanitizers.sh [asan] [tsan]
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(asan tsan)
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
tsan_tests=(http_server_test http_client_test worker_test worker_tasks_test dag_run_test
            worker_failure_test worker_actor_state_test worker_peer_connections_test
            worker_prefetch_test cpu_budget_test rest_snapshot_test
            worker_actor_state_tasks_test worker_state_loader_test)
for preset in "${presets[@]}"; do
  cmake --preset "$preset" "${launcher[@]}" >/dev/null
  case "$preset" in
    asan)
      cmake --build --preset asan
      ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --preset asan --timeout 300 \
        -E '^(cli_e2e|netns_|deploy_files|dashboard_browser|embedded_worker_install|bench_|python_|rl_|faults_)'
      ;;
    tsan)
      cmake --build --preset tsan --target hmpmd-worker "${tsan_tests[@]}"
      export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1"
      passed=0 failed=0
      for t in "${tsan_tests[@]}"; do
        echo "tsan: $t"
        if build-tsan/bin/"$t" --gtest_brief=1; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
      done
      echo "tsan: ${passed} passed, ${failed} failed"
      [ "$failed" -eq 0 ]
      ;;
    *) echo "sanitizers.sh: unknown preset '$preset' (asan, tsan)" >&2; exit 2 ;;
  esac
done
