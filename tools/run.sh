#!/usr/bin/env bash
# Set-up, build, and run the main job. Usage: tools/run.sh [arguments of the job]
# For now the job is troupe-demo, a small graph run through a Session; the training app
# replaces it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
source tools/env.sh
troupe_configure_and_build --target troupe-demo >/dev/null
exec "$TROUPE_BUILD_DIR/apps/troupe-demo" "$@"
