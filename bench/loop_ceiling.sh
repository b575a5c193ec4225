#!/usr/bin/env bash
# What two cores can give a loop's independent iterations on this machine, beside what the
# runtime gets (the target: parallel_iterations 10 at least 1.8x parallel_iterations 1).
# Per round, one after the other:
#   alone:    one process, the independent body, parallel_iterations 1, 1 scheduler thread;
#   together: two such processes at once (two streams of the same iterations that share nothing,
#             no runtime between them): 2 x alone / together is the most any scheduling of
#             independent iterations over two cores could gain here (the ceiling);
#   line:     a cache line's round trip between the two CPUs (troupe-bench cores), ns: what a
#             message between the workers costs at that minute (it doubles or triples for
#             stretches on this project's VM, and P10 with it; the ceiling's pair does not see it);
#   P1, P10:  one process, 2 threads, parallel_iterations 1 and 10, their steps in turn
#             (--interleave: a slow stretch of the machine falls on both alike), the runtime's
#             gain P1 / P10;
#   pair:     in the same process, its steps in turn with theirs (--pair), two loops of
#             parallel_iterations 1 side by side, per iteration of the two: P1 / pair is what the
#             runtime gets from the two cores, in the same seconds, for iterations that wait for
#             nothing on the other core (a VM's lone busy vCPU runs up to 40% faster in some
#             minutes than in others, and P1 with it: P1 / P10 swings with the minute, pair / P10
#             less);
#   cpu:      the CPU time of an iteration at P10 over that at P1 (all threads): the work that
#             spreading the iterations over the two workers adds (cross-core hand-offs, colder
#             caches, a worker spinning for work). P10's gain is at most 2 / cpu.
# Prints each round and the medians.
#   bash bench/loop_ceiling.sh [ROUNDS] [ITERATIONS] [STEPS]
set -euo pipefail
bench=${TROUPE_BUILD_DIR:-build}/bench/troupe-bench
rounds=${1:-5}
iterations=${2:-20000}
steps=${3:-10}
out=$(mktemp -d)
first=
trap 'if [[ -n $first ]]; then kill "$first" 2>/dev/null || true; fi; rm -rf "$out"' EXIT
loop() { "$bench" loop --body independent --iterations "$iterations" --steps "$steps" --json "$@" 2>/dev/null; }
# field NAME FILE [LINE]: the number NAME holds in the JSON line LINE (1) of FILE.
field() { grep -o "\"$1\":[0-9.]*" "$2" | cut -d: -f2 | sed -n "${3:-1}p"; }
us() { field us_per_iteration "$@"; }
cpu() { field cpu_us_per_iteration "$@"; }
printf '%5s %9s %9s %9s %8s %7s %9s %9s %8s %6s %7s %8s\n' round alone "two: a" b ceiling line P1 P10 P1/P10 cpu pair P1/pair
for r in $(seq "$rounds"); do
  loop --parallel 1 --threads 1 > "$out/alone"
  loop --parallel 1 --threads 1 > "$out/a" &
  first=$!
  loop --parallel 1 --threads 1 > "$out/b"
  wait "$first"
  first=
  line=$("$bench" cores --rounds 100000 --json | grep -o '"round_trip_ns":[0-9.]*' | cut -d: -f2)
  loop --parallel 1,10 --threads 2 --interleave --pair > "$out/p"
  python3 - "$r" "$(us "$out/alone")" "$(us "$out/a")" "$(us "$out/b")" "$line" "$(us "$out/p" 1)" "$(us "$out/p" 2)" \
    "$(cpu "$out/p" 1)" "$(cpu "$out/p" 2)" "$(us "$out/p" 3)" >> "$out/rows" <<'PY'
import sys
r, alone, a, b, line, p1, p10, cpu1, cpu10, pair = sys.argv[1], *map(float, sys.argv[2:])
print(r, alone, a, b, 2 * alone / ((a + b) / 2), line, p1, p10, p1 / p10, cpu10 / cpu1, pair, p1 / pair)
PY
  tail -1 "$out/rows" | awk '{printf "%5s %9.3f %9.3f %9.3f %8.2f %7.1f %9.3f %9.3f %8.2f %6.2f %7.3f %8.2f\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12}'
done
python3 - "$out/rows" <<'PY'
import statistics, sys
rows = [list(map(float, l.split()[1:])) for l in open(sys.argv[1])]
med = [statistics.median(c) for c in zip(*rows)]
print(f"{'median':>5} {med[0]:9.3f} {med[1]:9.3f} {med[2]:9.3f} {med[3]:8.2f} {med[4]:7.1f} {med[5]:9.3f} {med[6]:9.3f} {med[7]:8.2f} {med[8]:6.2f} {med[9]:7.3f} {med[10]:8.2f}")
print(f"us per iteration; ceiling = 2 x alone / mean of the two at once; line = a cache line's round trip between")
print(f"the CPUs, ns; P1/P10 = the runtime's gain on 2 threads; cpu = CPU time per iteration at P10 / at P1;")
print(f"pair = two P1 loops side by side, per iteration of the two, in turn with P1 and P10; P1/pair = its gain")
PY
