#!/usr/bin/env bash
# Installs the PyTorch peer (Debian's python3-torch, PyTorch 1.13, for /usr/bin/python3) and the
# Fashion-MNIST files, only for side-by-side figures. The main set-up never calls this.
set -euo pipefail
need=()
for p in python3-torch dataset-fashion-mnist; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] || need+=("$p")
done
if ((${#need[@]})); then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 update -q
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${need[@]}"
fi
/usr/bin/python3 -c 'import torch; print("torch", torch.__version__)'
