#!/usr/bin/env bash
# Installs the Debian 12 packages HyperMPMD needs, only those missing.
# Idempotent: a second run installs nothing and does not touch apt's lists.
# chromium: the dashboard browser test (tests/integration/dashboard_browser_test.py).
# pybind11-dev, python3-dev: the Python module hmpmd (python/); python3-numpy:
# its arrays (Python kernels, put/get); python3-torch: the PyTorch examples.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev libboost-dev libspdlog-dev
  nlohmann-json3-dev libcli11-dev libsqlite3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev libsodium-dev
  python3 python3-dev pybind11-dev python3-numpy python3-torch iproute2 chromium
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
