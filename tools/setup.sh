#!/usr/bin/env bash
# Installs the Debian packages Troupe needs to build and test, and only those missing.
# Idempotent: a second run checks with dpkg-query and installs nothing.
# Usage: tools/setup.sh [--build-only]   (--build-only: not the tools only the tests use; what the
# container image's build stage runs, Dockerfile)
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libcaf-dev libssl-dev capnproto libprotobuf-dev protobuf-compiler libcapnp-dev libfmt-dev libboost-test-dev nlohmann-json3-dev libcli11-dev
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev libeigen3-dev
  zlib1g-dev dataset-fashion-mnist
  python3
)
# What only the tests use: the container image's test (test/deploy/image_test.sh) builds the
# image with buildah on a Debian root of debootstrap's; the test across namespace hosts
# (test/apps/hosts_training_test.sh) runs sshd on each and troupe-launch --hosts over ssh.
if [[ "${1:-}" != --build-only ]]; then
  packages+=(buildah debootstrap python3-yaml openssh-server openssh-client procps)
fi

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
