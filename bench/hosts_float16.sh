#!/usr/bin/env bash
# All-reduce training across three hosts with shaped links: float32 against float16 gradients on
# the wire (docs/performance.md, "float16 on a shaped link"). Three network namespaces stand in for
# the hosts (test/apps/namespace_hosts_lib.sh); each host's link gets `tc netem` delay and a rate
# limit on its egress (only the rate, by tbf, on a kernel without netem); worker:0..2 run troupe-fashion-mnist --mode allreduce, one per host, with
# TF_CONFIG. For each model the two settings take turns, ROUNDS times each, then once more each
# with the links unshaped; prints each run's global steps/s (the chief's summary) and the medians.
# Run as root; everything it makes is removed at the end (namespaces, processes, by pid).
# Usage: bench/hosts_float16.sh BUILD_DIR [DELAY [RATE [ROUNDS]]]   (defaults: 1ms 1gbit 2)
set -euo pipefail
build=$(realpath "$1")
delay=${2:-1ms}
rate=${3:-1gbit}
rounds=${4:-2}
app=$build/apps/troupe-fashion-mnist
[[ -x $app ]] || { echo "no $app: build first"; exit 1; }
source "$(dirname "$0")/../test/apps/namespace_hosts_lib.sh"
work=$(mktemp -d)
pids=()
cleanup() {
  ((${#pids[@]} == 0)) || stop_children "${pids[@]}"
  remove_hosts
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT

hosts=(w0 w1 w2)
make_hosts "${hosts[@]}"
cluster="{\"worker\": [\"${address_of[w0]}:2222\", \"${address_of[w1]}:2222\", \"${address_of[w2]}:2222\"]}"

shape() {  # shape on|off
  local h
  for h in "${hosts[@]}"; do
    ip -n "$prefix-$h" link set eth0 txqueuelen 1000
    tc -n "$prefix-$h" qdisc del dev eth0 root 2>/dev/null || true
    [[ $1 == off ]] && continue
    if ((has_netem)); then
      tc -n "$prefix-$h" qdisc add dev eth0 root netem delay "$delay" rate "$rate" limit 100000
    else
      tc -n "$prefix-$h" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 20ms
    fi
  done
}
# A kernel without netem (CONFIG_NET_SCH_NETEM unset) can still limit the rate (tbf), not delay.
has_netem=1
tc -n "$prefix-w0" qdisc add dev eth0 root netem delay 1ms 2>/dev/null || has_netem=0
tc -n "$prefix-w0" qdisc del dev eth0 root 2>/dev/null || true

# run NAME APP_ARGS...: the three workers; prints the chief's global steps/s.
run() {
  local name=$1 k rc=0
  shift
  pids=()
  for k in 0 1 2; do
    ip netns exec "$prefix-w$k" env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": $k}}" \
      timeout -k 5 600 "$app" --threads 1 --mode allreduce --json "$@" >"$work/$name-$k.log" 2>&1 &
    pids+=($!)
  done
  for k in 0 1 2; do wait "${pids[k]}" || rc=$?; done
  pids=()
  ((rc == 0)) || { cat "$work/$name-0.log"; echo "$name failed"; exit 1; }
  python3 -c 'import json,sys
line=[l for l in open(sys.argv[1]) if l.startswith("{")][-1]
print(json.loads(line)["global_steps_per_s"])' "$work/$name-0.log"
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

if ((has_netem)); then links="netem delay $delay, rate $rate"; else links="tbf rate $rate (no netem in this kernel: no delay)"; fi
echo "three hosts, links: $links on each host's egress; allreduce, 3 workers, 1 thread each"
for model in mlp cnn; do
  steps=$([[ $model == mlp ]] && echo 300 || echo 40)
  f32=() f16=()
  shape on
  for ((r = 1; r <= rounds; ++r)); do
    f32+=("$(run "$model-f32-$r" --model "$model" --steps "$steps")")
    f16+=("$(run "$model-f16-$r" --model "$model" --steps "$steps" --float16)")
  done
  shape off
  plain32=$(run "$model-plain32" --model "$model" --steps "$steps")
  plain16=$(run "$model-plain16" --model "$model" --steps "$steps" --float16)
  echo "$model, $steps steps: shaped float32 ${f32[*]} (median $(median "${f32[@]}")), float16 ${f16[*]}" \
    "(median $(median "${f16[@]}")); unshaped float32 $plain32, float16 $plain16 global steps/s"
done
