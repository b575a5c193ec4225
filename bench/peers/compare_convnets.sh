#!/usr/bin/env bash
# `troupe-bench convnet` against bench/peers/convnets_torch.py, model by model, in one run, with
# the same batch, steps and FLOP rule, then one table.
# Usage: bench/peers/compare_convnets.sh [cpu|gpu] [steps] [warmup] [model:batch ...]
# Defaults: on cpu  alexnet:16 alexnet:128 overfeat:16 vgg:16 googlenet:16 (this 2-core machine),
#           on gpu  alexnet:128 overfeat:128 vgg:64 googlenet:128 (the paper's batches).
# On the CPU PyTorch runs with 2 threads in its two fastest settings here (OMP_WAIT_POLICY=PASSIVE
# and its default, active, wait policy); on a GPU with its defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
device=${1:-cpu}
steps=${2:-5}
warmup=${3:-2}
shift $(( $# < 3 ? $# : 3 ))
runs=("$@")
if ((${#runs[@]} == 0)); then
  if [[ $device == gpu ]]; then runs=(alexnet:128 overfeat:128 vgg:64 googlenet:128)
  else runs=(alexnet:16 alexnet:128 overfeat:16 vgg:16 googlenet:16); fi
fi
bash bench/peers/setup_torch.sh >/dev/null
source bench/peers/tagged_runs.sh
for r in "${runs[@]}"; do
  model=${r%%:*} batch=${r##*:}
  common=(--model "$model" --batch "$batch" --device "$device" --steps "$steps" --warmup "$warmup" --json)
  run "troupe" build/bench/troupe-bench convnet "${common[@]}"
  if [[ $device == gpu ]]; then
    run "torch" /usr/bin/python3 bench/peers/convnets_torch.py "${common[@]}"
  else
    run "torch, passive" env OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/convnets_torch.py "${common[@]}" --threads 2
    run "torch, active" /usr/bin/python3 bench/peers/convnets_torch.py "${common[@]}" --threads 2
  fi
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print(f"{'model':10} {'batch':>5} {'configuration':15} {'median ms':>10} {'min ms':>9} {'img/s':>7} "
      f"{'GFLOP/s':>8} {'params':>11} {'max RSS MiB':>11}")
for r in rows:
    print(f"{r['model']:10} {r['batch']:>5} {r['config']:15} {r['median_ms']:>10.1f} {r['min_ms']:>9.1f} "
          f"{r['images_per_s']:>7.1f} {r['gflops']:>8.1f} {r['parameters']:>11,} {r['max_rss_mib']:>11}")
PY
rm -f "$out"
