#!/usr/bin/env bash
# Set-up, build, and run the main job: training on Fashion-MNIST (apps/fashion_mnist.cpp).
# Usage: tools/run.sh [arguments of troupe-fashion-mnist, e.g. --epochs 3 --json]
#        tools/run.sh --workers N [--ps N] [--backup-workers K] [--tls] [arguments of troupe-fashion-mnist]
# With --workers (or --ps) the job runs on a local cluster made by troupe-launch: N ps tasks
# (troupe-node, 1 by default; none for --mode allreduce) and N workers, each one
# troupe-fashion-mnist --cluster SPEC --task worker:K (--tls: every connection mutual TLS), e.g.
#   bash tools/run.sh --workers 3 --ps 1 --mode sync --backup-workers 1 --model mlp
# It says what it does, a line per stage, and builds every program (CMake target `programs`: what
# `cmake --install` installs, not the tests), so every command of README.md and docs/ works after
# it. A second run with nothing to rebuild starts the job within seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
workers="" ps="" backup="" mode="" tls="" args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --workers|--ps|--backup-workers)
      [[ $# -ge 2 ]] || { echo "tools/run.sh: $1 needs a value" >&2; exit 2; }
      case $1 in --workers) workers=$2 ;; --ps) ps=$2 ;; --backup-workers) backup=$2 ;; esac
      shift 2 ;;
    --tls) tls=--tls; shift ;;
    --mode)
      [[ $# -ge 2 ]] || { echo "tools/run.sh: --mode needs a value" >&2; exit 2; }
      mode=$2; args+=("$1" "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [[ -z $workers && -z $ps ]]; then
  [[ -z $backup ]] || { echo "tools/run.sh: --backup-workers needs --workers" >&2; exit 2; }
  [[ -z $tls ]] || { echo "tools/run.sh: --tls needs --workers" >&2; exit 2; }
fi

echo "[1/4] packages: the Debian packages Troupe needs (tools/setup.sh; only those missing are installed)"
bash tools/setup.sh
source tools/env.sh
echo "[2/4] configure: CMake and Ninja into $TROUPE_BUILD_DIR/"
troupe_configure
echo "[3/4] build: every program and library (the first time several minutes on 2 cores; ccache keeps later ones short)"
troupe_build_with_progress --target programs
if [[ -z $workers && -z $ps ]]; then
  echo "[4/4] run: $TROUPE_BUILD_DIR/apps/troupe-fashion-mnist ${args[*]}"
  exec "$TROUPE_BUILD_DIR/apps/troupe-fashion-mnist" "${args[@]}"
fi
[[ -n $ps ]] || { if [[ $mode == allreduce ]]; then ps=0; else ps=1; fi; }
launch=("$TROUPE_BUILD_DIR/apps/troupe-launch" --ps "$ps" --workers "${workers:-2}")
[[ -z $backup ]] || launch+=(--backup-workers "$backup")
[[ -z $tls ]] || launch+=(--tls)
echo "[4/4] run: ${launch[*]} -- $TROUPE_BUILD_DIR/apps/troupe-fashion-mnist ${args[*]}"
exec "${launch[@]}" -- "$TROUPE_BUILD_DIR/apps/troupe-fashion-mnist" "${args[@]}"
