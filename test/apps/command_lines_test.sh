#!/usr/bin/env bash
# Every program's command line (CLI11): --help exits 0 and lists the program's options (with a
# default where the option has one); an unknown option, a bad value or an unknown subcommand exits
# non-zero with a message naming it. Nothing here starts real work: every call ends at the
# parse (or, for troupe-node --status of an address where nothing listens, at its bounded
# connect), and each is bounded (timeout 20).
# Usage: command_lines_test.sh TROUPE_BENCH TROUPE_NODE TROUPE_LAUNCH TROUPE_FASHION_MNIST
set -uo pipefail
bench=$1
node=$2
launch=$3
app=$4
failures=0
fail() { echo "command_lines_test: FAILED: $*" >&2; failures=$((failures + 1)); }

# help "PROGRAM ARGS..." WANTED...: --help exits 0 and its output holds every WANTED text.
help() {
  local cmd=$1
  shift
  local out
  out=$(timeout 20 $cmd --help 2>&1) || { fail "$cmd --help exited $?: $out"; return; }
  for wanted in "$@"; do
    [[ $out == *"$wanted"* ]] || fail "$cmd --help does not show '$wanted':
$out"
  done
}
# refused "PROGRAM ARGS..." NAMED: exits non-zero and says NAMED on stderr.
refused() {
  local cmd=$1 named=$2
  local err rc
  err=$(timeout 20 $cmd 2>&1 >/dev/null)
  rc=$?
  [[ $rc -ne 0 && $rc -ne 124 ]] || fail "$cmd exited $rc (expected a refusal)"
  [[ $err == *"$named"* ]] || fail "$cmd: the message does not name '$named':
$err"
}

help "$bench" executor convnet loop pipeline checkpoint transfer cluster allreduce cores
help "$bench convnet" "--model" "=alexnet" "--batch" "=16" "--steps" "{cpu,gpu}"
help "$bench allreduce" "--procs" "--mib" "--float16"
help "$bench executor" "--shape" "=chain" "--nodes" "=10000"
help "$bench loop" "--parallel" "--interleave" "--iterations" "--pair"
help "$bench transfer" "--sizes" "--window"
help "$bench cores" "--cpus" "--rounds" "=200000"
help "$node" "--cluster" "--task" "--variable-memory-mb" "=0" "--status" "--make-certs"
help "$launch" "--ps" "=1" "--workers" "--backup-workers" "--tls" "--spares"
help "$app" "--mode" "=async" "--backup-workers" "--steps" "--batch" "=64" "--recovery-grace-s"

refused "$bench nosuch" nosuch
refused "$bench convnet --no-such-option" --no-such-option
refused "$bench convnet --batch abc" "--batch: 'abc' is not a number"
refused "$bench convnet --model lenet" --model
refused "$bench convnet --device gpu --steps 1" "has no GPU kernel, and Troupe has no GPU kernels yet"
refused "$bench loop --parallel 1,0" --parallel
refused "$bench loop --trace /tmp/unwritten.json" "--trace writes one loop's steps"
refused "$bench loop --body trivial --parallel 1 --pair --trace /tmp/unwritten.json" "no --pair"
refused "$bench transfer --sizes 4K,12X" "'12X' is not a size"
refused "$bench allreduce --procs 2,x" --procs
refused "$bench checkpoint" --dir
refused "$bench cores --cpus 0,0" "two different CPUs"
refused "$bench cores --cpus 0,100000" "--cpus"
refused "$node --no-such-option" --no-such-option
refused "$node --threads -2" "--threads: -2 is negative"
refused "$node --variable-memory-mb lots" "--variable-memory-mb"
refused "$node --status 127.0.0.1:1" "127.0.0.1:1"
refused "$node --make-certs /tmp/nowhere" "give the cluster's spec with --cluster"
refused "$node --make-certs /tmp/nowhere --task ps:0" "--task"
refused "$launch --no-such-option -- true" --no-such-option
refused "$launch --workers 0 -- true" "--workers"
refused "$app --no-such-option" --no-such-option
refused "$app --steps -3" "--steps: -3 is negative"
refused "$app --mode hogwild" "--mode"
refused "$app --batch 0" "--batch"

if [[ $failures -gt 0 ]]; then
  echo "command_lines_test: $failures failure(s)" >&2
  exit 1
fi
echo "command_lines_test: passed"
