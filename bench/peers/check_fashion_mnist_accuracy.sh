#!/usr/bin/env bash
# Guards the main job's accuracy: trains the CNN for 3 epochs with the app's default
# recipe (the same as bench/peers/fashion_mnist_torch.py's) and checks the test accuracy against
# the target, 0.885 (PyTorch's same recipe reaches 0.887). Prints the accuracy of each epoch and a
# last line PASS: ... or FAIL: ...; exits 0 on PASS, 1 on FAIL, 2 when the app fails to run.
# Takes about 70 s on 2 cores. Not run by ctest (a minute of training); run it after changes to
# the input pipeline, the app, the NN kernels or the optimizers.
# Usage: bench/peers/check_fashion_mnist_accuracy.sh [app arguments, e.g. --seed 2 --threads 1]
# (TROUPE_BUILD_DIR: the build folder, build by default; the app must be built.)
set -uo pipefail
cd "$(dirname "$0")/../.."
app=${TROUPE_BUILD_DIR:-build}/apps/troupe-fashion-mnist
target=0.885
if [[ ! -x "$app" ]]; then
  echo "FAIL: $app is not built (cmake --build build --target troupe-fashion-mnist)"
  exit 2
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! "$app" --model cnn --epochs 3 --json "$@" >"$out"; then
  cat "$out"
  echo "FAIL: troupe-fashion-mnist --model cnn --epochs 3 $* did not finish"
  exit 2
fi
python3 - "$out" "$target" "$*" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
target, extra = float(sys.argv[2]), sys.argv[3]
for r in rows:
    print(f"epoch {r['epoch']}: train loss {r['train_loss']:.4f}, test accuracy {r['test_accuracy']:.4f}")
if len(rows) != 3:
    print(f"FAIL: expected 3 epochs of JSON output, got {len(rows)}")
    sys.exit(2)
acc = rows[-1]["test_accuracy"]
verdict = "PASS" if acc >= target else "FAIL"
relation = ">=" if acc >= target else "<"
print(f"{verdict}: CNN test accuracy after 3 epochs {acc:.4f} {relation} {target}"
      f" (troupe-fashion-mnist --model cnn --epochs 3{' ' + extra if extra else ''})")
sys.exit(0 if verdict == "PASS" else 1)
PY
