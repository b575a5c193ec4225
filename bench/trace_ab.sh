#!/usr/bin/env bash
# What tracing costs (docs/performance.md, "Tracing: what it costs"): the executor chain
# and Fashion-MNIST CNN steps, A/B in one run, alternating: OLD (a troupe build from before
# tracing: its build/ folder), this build untraced, and this build tracing every timed step.
# Usage: bench/trace_ab.sh OLD_BUILD_DIR [ROUNDS]   (run from the repository root after building)
set -euo pipefail
old=${1:?usage: bench/trace_ab.sh OLD_BUILD_DIR [ROUNDS]}
rounds=${2:-5}
new=build
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "# executor chain, 10000 nodes, 30 timed steps: us per node (median step / nodes)"
for ((r = 1; r <= rounds; r++)); do
  echo "old $("$old/bench/troupe-bench" executor --nodes 10000 --steps 30 --json)"
  echo "off $("$new/bench/troupe-bench" executor --nodes 10000 --steps 30 --json)"
  echo "on  $("$new/bench/troupe-bench" executor --nodes 10000 --steps 30 --json --trace "$work/chain.json")"
done
echo "# Fashion-MNIST CNN, batch 64: examples/s over the first 376 steps"
rate() { grep -o 'step 376/938 .* [0-9]* examples/s' | grep -o '[0-9]* examples/s' | cut -d' ' -f1; }
for ((r = 1; r <= rounds; r++)); do
  echo "old $("$old/apps/troupe-fashion-mnist" --model cnn --stop-after-steps 400 | rate)"
  echo "off $("$new/apps/troupe-fashion-mnist" --model cnn --stop-after-steps 400 | rate)"
  echo "on  $("$new/apps/troupe-fashion-mnist" --model cnn --stop-after-steps 400 --trace "$work/cnn.json" --trace-steps 1-400 | rate)"
done
