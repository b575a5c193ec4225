#!/usr/bin/env bash
# Parameter-server training of the Fashion-MNIST MLP (784-256-256-10, batch 64 per worker,
# momentum SGD 0.01/0.9) in Troupe and in TensorFlow's own PS runtime (ps_mlp_tf.py:
# tf.compat.v1.train.Server, replica_device_setter, SyncReplicasOptimizer), every task a process
# of its own on 127.0.0.1, for the same number of global steps:
#   async: 1 ps + 2 workers;   sync: 1 ps + 3 workers, 1 backup (2 gradients aggregated a step).
# For each mode Troupe's side runs, then TensorFlow's; each prints the chief's JSON summary line
# (global_steps_per_s, examples_per_s, test_accuracy, dropped_gradients), then one table.
# Usage: bench/peers/compare_ps.sh [STEPS [OPTIONS...]]   (default 1000 global steps)
#   OPTIONS go to both sides, e.g. --delay-ms 20 (the last worker a straggler), --threads 1.
#   BUILD=DIR picks Troupe's build folder (default build).
# Needs DIR/apps/troupe-launch and troupe-fashion-mnist (tools/test.sh builds them) and the TF peer
# (bench/peers/setup_tf.sh installs it into bench/peers/.venv-tf). Without Troupe's side it says so
# and runs TensorFlow's side alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-1000}
shift || true
extra=("$@")
build=${BUILD:-build}
bash bench/peers/setup_tf.sh >/dev/null 2>&1
python=bench/peers/.venv-tf/bin/python

launch=$build/apps/troupe-launch
app=$build/apps/troupe-fashion-mnist
if [[ ! -x $launch || ! -x $app ]]; then
  echo "no $launch or $app: run tools/test.sh to build them; running TensorFlow's side alone" >&2
  launch=
elif [[ $("$app" --help 2>&1 || true) != *"--backup-workers"* ]]; then
  echo "$app has no parameter-server modes yet; running TensorFlow's side alone" >&2
  launch=
fi

# Troupe's side: troupe-launch prefixes every line with its task; the chief's summary is the
# "[worker:0] {...}" line. It goes to stdout bare, the rest of the job's output to stderr.
troupe_ps() {  # troupe_ps --ps P --workers W [--backup-workers K] -- APP OPTIONS...
  "$launch" "$@" | awk '/^\[worker:0\] \{/ { sub(/^\[worker:0\] /, ""); print; fflush(); next }
                         { print > "/dev/stderr" }'
}

source bench/peers/tagged_runs.sh
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
modes=("async --ps 1 --workers 2" "sync --ps 1 --workers 3 --backup-workers 1")
for m in "${modes[@]}"; do
  read -r mode cluster <<<"$m"
  read -ra cluster <<<"$cluster"
  if [[ -n $launch ]]; then
    echo "# troupe: $launch ${cluster[*]} -- $app --model mlp --mode $mode --steps $steps --json ${extra[*]}" >&2
    run "troupe-$mode" troupe_ps "${cluster[@]}" -- "$app" --model mlp --mode "$mode" --steps "$steps" \
      --json "${extra[@]}"
  fi
  echo "# tensorflow: $python bench/peers/ps_mlp_tf.py --mode $mode ${cluster[*]} --steps $steps --json ${extra[*]}" >&2
  # TensorFlow logs its start-up to stderr; keep it out of the table, show it on failure.
  if ! run "tensorflow-$mode" "$python" bench/peers/ps_mlp_tf.py --mode "$mode" "${cluster[@]}" \
      --steps "$steps" --json "${extra[@]}" 2>"$err"; then
    cat "$err" >&2
    exit 1
  fi
done

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print(f"{'system':12} {'mode':5} {'ps':>2} {'workers':>7} {'backup':>6} {'global_steps':>12} "
      f"{'steps/s':>8} {'examples/s':>10} {'test_acc':>8} {'dropped':>7}")
for r in rows:
    dropped = "n/a" if r.get("dropped_gradients") is None else r["dropped_gradients"]
    print(f"{r['system']:12} {r['mode']:5} {r['ps']:>2} {r['workers']:>7} {r['backup_workers']:>6} "
          f"{r['global_steps']:>12} {r['global_steps_per_s']:>8.1f} {r['examples_per_s']:>10.0f} "
          f"{r['test_accuracy']:>8.4f} {dropped:>7}")
PY
