#!/usr/bin/env bash
# Measures the figures bench/scaling_model.py runs on, with the project's own benchmarks, and
# writes them as JSON (to OUT, else stdout). About 30 s on this 2-core machine:
#   round_trip_us, bandwidth_gb_per_s  troupe-bench transfer (loopback): CAF's round trip (a step's
#                                      RunGraph and its answer cross CAF's connections); the data
#                                      path's bandwidth at 1 and 16 MiB (what values cross)
#   mlp_step_ms                        troupe-fashion-mnist --model mlp in one process on 1 thread (as
#                                      fast as 2 here), its second epoch: mlp_step_cores 1
#   alexnet_step_ms                    troupe-bench convnet --model alexnet --batch 64 (median of 3),
#                                      on every core: alexnet_step_cores = cores;
#                                      alexnet_parameters its parameter count
#   cores                              the cores these processes could use (nproc)
# step_cv is not measured (the model assumes 0.1 unless the file says otherwise).
# Usage: bash bench/measure_for_scaling.sh [OUT.json]   (binaries under $TROUPE_BUILD_DIR, default build)
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/env.sh
out=${1:-/dev/stdout}
bench=$TROUPE_BUILD_DIR/bench/troupe-bench
mnist=$TROUPE_BUILD_DIR/apps/troupe-fashion-mnist
for binary in "$bench" "$mnist"; do
  [[ -x $binary ]] || { echo "measure_for_scaling: $binary not built (set TROUPE_BUILD_DIR)" >&2; exit 1; }
done
transfer=$("$bench" transfer --sizes 1M,16M --seconds 1 --json)
mlp=$("$mnist" --model mlp --epochs 2 --threads 1 --json)
alexnet=$("$bench" convnet --model alexnet --batch 64 --steps 3 --warmup 1 --json)
TRANSFER=$transfer MLP=$mlp ALEXNET=$alexnet CORES=$(nproc) python3 - >"$out" <<'PY'
import json, os, statistics
lines = lambda name: [json.loads(l) for l in os.environ[name].splitlines() if l.startswith("{")]
transfer = lines("TRANSFER")
rtt = [l["caf_us"] for l in transfer if l["what"] == "round_trip"]
bandwidth = [l["data_path_gb_per_s"] for l in transfer if l["what"] == "throughput"]
epoch = lines("MLP")[-1]  # the second epoch: the first one warms up
alexnet = lines("ALEXNET")[0]
if not rtt or not bandwidth:
    raise SystemExit("measure_for_scaling: troupe-bench transfer printed no round trip or throughput line")
print(json.dumps({
    "source": "bench/measure_for_scaling.sh",
    "round_trip_us": rtt[0],
    "bandwidth_gb_per_s": round(statistics.mean(bandwidth), 3),
    "mlp_step_ms": round(epoch["epoch_seconds"] * 1e3 * epoch["epoch"] / epoch["global_step"], 4),
    "mlp_step_cores": 1,
    "alexnet_step_ms": alexnet["median_ms"],
    "alexnet_step_cores": alexnet["threads"],
    "alexnet_parameters": alexnet["parameters"],
    "cores": int(os.environ["CORES"]),
}, indent=1))
PY
