# Sourced by the compare_*.sh scripts: `run LABEL COMMAND...` runs a command, shows its output
# and keeps its JSON lines, tagged with "config": LABEL, in the file named by $out.
out=$(mktemp)
run() {
  local label=$1
  shift
  "$@" | while IFS= read -r line; do
    echo "$line"
    [[ $line == "{"* ]] && echo "${line%\}}, \"config\": \"$label\"}" >>"$out"
  done
}
