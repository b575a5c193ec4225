#!/usr/bin/env bash
# Two trainings on the same cores (several Troupe processes on one host): AlexNet,
# batch 16, alone and then two at once, with Troupe's default (OpenMP spinning bounded,
# devices/cpu_threads.hpp) and with libgomp's own default (GOMP_SPINCOUNT=300000) for comparison.
# Each shared step should take about twice a lone one, and none more than 3x the lone median.
#   bash bench/two_trainings.sh [STEPS]
set -euo pipefail
bench=${TROUPE_BUILD_DIR:-build}/bench/troupe-bench
steps=${1:-10}
args=(convnet --model alexnet --batch 16 --steps "$steps" --warmup 1 --json)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
field() { grep -o "\"$1\":[0-9.]*" "$2" | cut -d: -f2; }
for setting in "Troupe default" "GOMP_SPINCOUNT=300000"; do
  envs=()
  [[ $setting == GOMP* ]] && envs=(env "$setting")
  "${envs[@]}" "$bench" "${args[@]}" > "$out/alone"
  "${envs[@]}" "$bench" "${args[@]}" > "$out/a" &
  first=$!
  "${envs[@]}" "$bench" "${args[@]}" > "$out/b"
  wait "$first"
  alone=$(field median_ms "$out/alone")
  printf '%s: alone median %s ms; two at once: median %s and %s ms, max %s and %s ms\n' "$setting" "$alone" \
    "$(field median_ms "$out/a")" "$(field median_ms "$out/b")" "$(field max_ms "$out/a")" "$(field max_ms "$out/b")"
done
