#!/usr/bin/env bash
# Renders a training report (troupe-fashion-mnist's report.html) in headless Chromium and saves a
# screenshot, to look at how the page reads (docs/observability.md, "The training report").
# Usage: tools/check_report.sh REPORT.html [SHOT.png]   (default SHOT: REPORT.png)
# Needs Debian's chromium (apt-get install chromium; not part of the set-up). The page loads
# nothing from the network: Chromium runs with networking off (--host-resolver-rules).
set -euo pipefail
report=${1:?usage: tools/check_report.sh REPORT.html [SHOT.png]}
shot=${2:-${report%.html}.png}
[[ -f $report ]] || { echo "check_report: no file $report" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "check_report: no chromium here (apt-get install chromium)" >&2; exit 77; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 60 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --host-resolver-rules="MAP * ~NOTFOUND" --window-size=1000,2000 --screenshot="$shot" \
  "file://$(realpath "$report")" > "$profile/log" 2>&1 || { cat "$profile/log" >&2; exit 1; }
[[ -s $shot ]] || { cat "$profile/log" >&2; echo "check_report: no screenshot" >&2; exit 1; }
echo "check_report: $shot"
