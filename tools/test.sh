#!/usr/bin/env bash
# Set-up, configure, build, and run every test. Usage: tools/test.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
troupe_configure_and_build
ctest --test-dir "$TROUPE_BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 600 "$@"
