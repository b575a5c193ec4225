#!/usr/bin/env bash
# Fuzzes the checkpoint index reader (test/fuzz/checkpoint_index_fuzz.cpp) with libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer for SECONDS (default 60):
#   tools/fuzz_checkpoint.sh [SECONDS]
# Installs Debian's clang if it is missing. Builds in build-fuzz/ (the index code, its core
# dependencies and the Cap'n Proto schemas, all instrumented), seeds the corpus with valid
# indexes (after the ctest driver's mutations, sanitized too), and exits non-zero with the crashing input saved under build-fuzz/ if any input
# crashes, leaks, hangs (-timeout=10) or throws anything but troupe::Error.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

if ! command -v clang++ >/dev/null; then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 update -q
  "${sudo_cmd[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends clang
fi

out=build-fuzz
mkdir -p "$out/gen" "$out/corpus"
capnp compile -oc++:"$out/gen" --src-prefix=. core/wire/tensor.capnp core/wire/checkpoint.capnp
sources=(core/error.cpp core/dtype.cpp core/shape.cpp core/allocator.cpp core/tensor.cpp
         core/wire/convert.cpp core/crc32c.cpp core/checkpoint_index.cpp
         "$out/gen/core/wire/tensor.capnp.c++" "$out/gen/core/wire/checkpoint.capnp.c++")
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
       -fno-sanitize-recover=undefined -I. -I"$out/gen")
echo "fuzz_checkpoint: building $out/checkpoint_index_fuzz"
clang++ "${flags[@]}" test/fuzz/checkpoint_index_fuzz.cpp "${sources[@]}" \
  $(pkg-config --cflags --libs capnp fmt) -o "$out/checkpoint_index_fuzz"

# The deterministic driver of ctest, under the same sanitizers: it writes the seeds (valid
# indexes) and runs its 20,000 mutations first.
clang++ "${flags[@]/-fsanitize=fuzzer,address,undefined/-fsanitize=address,undefined}" \
  test/fuzz/fuzz_driver.cpp test/fuzz/checkpoint_index_fuzz.cpp "${sources[@]}" \
  $(pkg-config --cflags --libs capnp fmt) -o "$out/fuzz_driver"
"$out/fuzz_driver" --seeds "$out/corpus"
"$out/fuzz_driver" 20000
"$out/checkpoint_index_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=4096 -artifact_prefix="$out/" "$out/corpus"
