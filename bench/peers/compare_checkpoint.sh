#!/usr/bin/env bash
# Troupe's checkpoints beside dd and PyTorch on the same bytes, in one run, one after the other.
# Usage: bench/peers/compare_checkpoint.sh [DIR] [MiB] [repeats]
#   DIR (default: a new directory under build/) is where all three write; give one on the disk
#   you care about. Needs build/bench/troupe-bench and the PyTorch peer (bench/peers/setup_torch.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-}
mib=${2:-256}
repeats=${3:-3}
if [[ -z "$dir" ]]; then
  dir=$(mktemp -d "$PWD/build/ckpt-bench.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir"
bash bench/peers/setup_torch.sh >/dev/null
out=$(mktemp)
for r in $(seq "$repeats"); do
  build/bench/troupe-bench checkpoint --dir "$dir/troupe" --mib "$mib" --steps 1 --json | tee -a "$out"
  # dd: the same bytes, 4 MiB blocks, synced before it reports (conv=fsync).
  dd if=/dev/zero of="$dir/dd.bin" bs=4M count=$((mib / 4)) conv=fsync 2>&1 | tail -1 |
    awk -v b=$((mib * 1048576)) '{ for (i = 1; i <= NF; ++i) if ($i == "s,") s = $(i-1); }
      END { printf "{\"system\":\"dd conv=fsync\",\"bytes\":%d,\"save_gbps\":%.3f}\n", b, b / s / 1e9 }' | tee -a "$out"
  rm -f "$dir/dd.bin"
  /usr/bin/python3 bench/peers/checkpoint_torch.py --dir "$dir" --mib "$mib" --repeats 1 | tee -a "$out"
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault(r["system"], []).append(r)
print()
print(f"{'system':42} {'save GB/s (median)':>19} {'restore GB/s (median)':>22}  runs")
for name, rs in by.items():
    save = statistics.median(r["save_gbps"] for r in rs)
    restore = [r["restore_gbps"] for r in rs if "restore_gbps" in r]
    rest = f"{statistics.median(restore):.3f}" if restore else "-"
    print(f"{name:42} {save:>19.3f} {rest:>22}  " + " ".join(f"{r['save_gbps']:.3f}" for r in rs))
PY
rm -f "$out"
