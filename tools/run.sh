#!/usr/bin/env bash
# Set-up, build, and run the main job: training on Fashion-MNIST (apps/fashion_mnist.cpp).
# Usage: tools/run.sh [arguments of troupe-fashion-mnist, e.g. --epochs 3 --json]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
troupe_configure_and_build --target troupe-fashion-mnist >/dev/null
exec "$TROUPE_BUILD_DIR/apps/troupe-fashion-mnist" "$@"
