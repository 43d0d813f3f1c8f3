#!/usr/bin/env bash
# Installs HyperMPMD into a temporary prefix, builds examples/embedded_worker
# against the installed package (find_package(hmpmd), hmpmd::worker) and
# runs a job on two of its processes with `hmpmd run --worker-binary`; builds
# examples/driver (hmpmd::client) the same way and runs it up to its connect.
# Usage: embedded_worker_test.sh BUILD_DIR SOURCE_DIR HMPMD_BINARY
set -euo pipefail
build=$1 src=$2 hmpmd=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
test -f "$tmp/prefix/lib/cmake/hmpmd/hmpmdConfig.cmake" || test -f "$tmp/prefix/lib64/cmake/hmpmd/hmpmdConfig.cmake"
# The public headers expose no ZeroMQ or msgpack type.
if grep -rlE '#include.*(zmq|msgpack)|zmq::|msgpack::' "$tmp/prefix/include/hmpmd"; then
  echo "installed headers mention zmq or msgpack" >&2
  exit 1
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$src/examples/embedded_worker" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >"$tmp/configure.log"
cmake --build "$tmp/build" -j 2 >"$tmp/build.log" || { cat "$tmp/build.log" >&2; exit 1; }

# relu is only in the embedded program: the job succeeds only on it.
# --cores as hmpmd-worker reads it, in any order.
"$hmpmd" run "$src/examples/embedded_worker/relu_job.json" --workers 2 \
  --worker-binary "$tmp/build/embedded_worker" --timeout 60 --cores vector=1,cube=1

# The driver library links from the package too: with no controller there,
# the program runs as far as Connect and says so.
cmake -S "$src/examples/driver" -B "$tmp/driver" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >"$tmp/configure-driver.log"
cmake --build "$tmp/driver" -j 2 >"$tmp/build-driver.log" || { cat "$tmp/build-driver.log" >&2; exit 1; }
# --help and -h print the usage, not "'--help' is not tcp://HOST:PORT".
for flag in --help -h; do
  usage=$("$tmp/driver/driver" "$flag")
  [[ $usage == "usage: driver [CONTROLLER] [CONNECT_TIMEOUT_MS]"* ]] ||
    { echo "driver $flag printed: $usage" >&2; exit 1; }
done
if "$tmp/driver/driver" tcp://127.0.0.1:9 300 2>"$tmp/driver.err"; then
  echo "the driver example connected to nothing" >&2
  exit 1
fi
grep -q "no controller answered at tcp://127.0.0.1:9 within 300 ms" "$tmp/driver.err" ||
  { cat "$tmp/driver.err" >&2; exit 1; }
