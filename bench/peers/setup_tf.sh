#!/usr/bin/env bash
# Installs the TensorFlow peer (tensorflow-cpu from PyPI) into a virtual environment at
# bench/peers/.venv-tf, only for side-by-side figures. The main set-up never calls this.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv-tf"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import tensorflow' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check "tensorflow-cpu==${TF_VERSION:-2.21.0}"
fi
"$venv/bin/python" -c 'import tensorflow as tf; print("tensorflow", tf.__version__)'
