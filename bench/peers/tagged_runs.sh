# Sourced by the compare_*.sh scripts: `run LABEL COMMAND...` runs a command, shows its output
# and keeps its JSON lines, tagged with "config": LABEL, in the file named by $out; `in_turn A B
# ARGS...` runs the commands A and B with ARGS, which goes first alternating from call to call.
out=$(mktemp)
run() {
  local label=$1
  shift
  "$@" | while IFS= read -r line; do
    echo "$line"
    [[ $line == "{"* ]] && echo "${line%\}}, \"config\": \"$label\"}" >>"$out"
  done
}

# A then B, B then A, A then B, ...: each system follows itself as often as the other. A process
# started right after another has exited runs slower for a while on this project's VM (it pays
# for touching the memory that one freed: docs/performance.md), and TensorFlow frees about ten
# times what Troupe does.
pair=0
in_turn() {
  local first=$1 second=$2
  shift 2
  if ((pair++ % 2 == 1)); then
    local t=$first
    first=$second
    second=$t
  fi
  "$first" "$@"
  "$second" "$@"
}
