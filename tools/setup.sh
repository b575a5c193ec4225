#!/usr/bin/env bash
# Installs the Debian packages Troupe needs to build and test, and only those missing.
# Idempotent: a second run checks with dpkg-query and installs nothing.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libcaf-dev libssl-dev capnproto libprotobuf-dev protobuf-compiler libcapnp-dev libfmt-dev libboost-test-dev nlohmann-json3-dev libcli11-dev
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev libeigen3-dev
  zlib1g-dev dataset-fashion-mnist
  python3
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 update -q
"${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}"
