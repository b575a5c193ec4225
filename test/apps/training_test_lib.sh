# Shared by the training tests that run troupe-fashion-mnist (source it after `set -euo pipefail`).
# Exits 77 (skipped) where the Fashion-MNIST files are missing.
data=${TROUPE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [[ ! -e $data/train-images-idx3-ubyte.gz && ! -e $data/train-images-idx3-ubyte ]]; then
  echo "skipped: no Fashion-MNIST in $data"
  exit 77
fi
# field NAME FILE: the value of NAME in the last JSON line of FILE (the chief's summary).
field() {
  python3 -c 'import json,sys
lines=[l for l in open(sys.argv[2]) if l.lstrip("[worker:0] ").startswith("{")]
print(json.loads(lines[-1][lines[-1].index("{"):])[sys.argv[1]])' "$1" "$2"
}
# at_least VALUE REFERENCE MARGIN: VALUE >= REFERENCE - MARGIN.
at_least() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) - float(sys.argv[3]) else 1)' "$@"; }
