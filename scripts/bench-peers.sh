#!/usr/bin/env bash
# Runs bench/peers: the same four workloads on HyperMPMD, Dask distributed and
# raw ZeroMQ, in one run on this machine, and writes the table, CSV and PNG.
#
#   scripts/bench-peers.sh            # 3 runs per figure -> bench/peers/results/
#   scripts/bench-peers.sh --quick    # 1 run per figure  -> build/bench-peers-quick/
#   scripts/bench-peers.sh --runs 5 --out DIR
#
# Installs what is missing (the build's packages, python3-distributed,
# python3-matplotlib) and builds bench_peers; idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=3
out=""
quick=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; runs=1 ;;
    --runs) runs="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "bench-peers: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$out" ]; then
  if [ "$quick" = 1 ]; then out=build/bench-peers-quick; else out=bench/peers/results; fi
fi

independent=20000 chain=2000 leaves=5000 fan_in=8
multimodal=bench/peers/multimodal_spin.json

scripts/install-deps.sh
missing=()
for p in python3-distributed python3-matplotlib; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench-peers: installing ${missing[*]}"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" ||
    { "${sudo_cmd[@]}" apt-get update -q &&
      "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; }
fi

# Debian's packages are for Debian's interpreter, whatever python3 is on PATH.
py=/usr/bin/python3
build_dir=${HMPMD_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
fi
ninja -C "$build_dir" -j "${HMPMD_JOBS:-2}" bench_peers hmpmd-worker >/dev/null

mkdir -p "$out"
rows="$out/runs.csv"
: > "$rows"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
dask_version=$("$py" -c 'import distributed; print(distributed.__version__)')
machine="$(nproc) CPUs ($cpu), Debian $(cat /etc/debian_version), Dask distributed $dask_version, load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "bench-peers: $machine"
echo "bench-peers: HyperMPMD and raw ZeroMQ ($runs run(s) per figure)"
"$build_dir/bin/bench_peers" --runs "$runs" --independent "$independent" --chain "$chain" \
  --leaves "$leaves" --fan-in "$fan_in" --multimodal "$multimodal" --csv "$rows"
echo "bench-peers: Dask distributed"
"$py" bench/peers/dask_bench.py --runs "$runs" --independent "$independent" --chain "$chain" \
  --leaves "$leaves" --fan-in "$fan_in" --multimodal "$multimodal" --csv "$rows"
"$py" bench/peers/report.py "$rows" --out "$out" --independent "$independent" --chain "$chain" \
  --leaves "$leaves" --fan-in "$fan_in" --multimodal "$multimodal" --machine "$machine"
echo "bench-peers: wrote $out/table.txt, $out/peers.csv, $out/peers.png, $out/runs.csv"
