#!/usr/bin/env bash
# Uses Troupe as another project would: installs a build into a temporary prefix, checks the
# install (no installed header reaches a non-installed one or CAF, Cap'n Proto or oneDNN; no
# path into the build tree; the installed programs and the CUDA module load from the prefix),
# then configures, builds and runs every examples/NAME/ project against the prefix alone
# (find_package(Troupe) with -DCMAKE_PREFIX_PATH=prefix), the training example on a local
# cluster in each strategy with the installed troupe-launch, and one example once more through
# pkg-config. Each examples/NAME/ builds one executable named NAME that exits 0 on success.
# Any failure stops the script with a message naming it. The prefix is removed at exit.
#
# Usage: tools/examples.sh [BUILD_DIR]   (a full build; default: the repository's
# $TROUPE_BUILD_DIR or build)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:+$(cd "$1" && pwd)}  # relative to where the script is run from
cd "$repo"
source tools/env.sh
build=${build:-$(cd "$TROUPE_BUILD_DIR" && pwd)}

work=$(mktemp -d "${TMPDIR:-/tmp}/troupe-examples.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
say() { echo "examples.sh: $*"; }
die() { echo "examples.sh: FAILED: $*" >&2; exit 1; }

say "installing $build into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; die "cmake --install"; }

# Every installed header, in one translation unit, with only the prefix on the include path:
# a header that includes a non-installed one fails here, and the dependency list shows any
# header of a library the package does not declare.
headers=$(cd "$prefix/include/troupe" && find . -name '*.hpp' | sed 's|^\./||' | sort)
[[ -n "$headers" ]] || die "no headers under $prefix/include/troupe"
for h in $headers; do echo "#include \"$h\""; done >"$work/all_headers.cpp"
g++ -std=c++20 -M -I"$prefix/include/troupe" "$work/all_headers.cpp" >"$work/deps" ||
  die "an installed header includes one that is not installed (see above)"
private_re='/(caf|capnp|kj|oneapi|boost|cuda)/|dnnl|cblas|openblas'
if private=$(tr ' \\' '\n\n' <"$work/deps" | grep -E "$private_re"); then
  culprits=$(cd "$prefix/include/troupe" && grep -rlE '^#include [<"](caf|capnp|kj|oneapi|boost|cuda|dnnl|cblas|openblas)' . || true)
  die "installed headers include headers of libraries private to the libtroupe_*.so (" \
      "$(head -3 <<<"$private" | tr '\n' ' ')...), directly: ${culprits:-none, through another library}"
fi
g++ -std=c++20 -fsyntax-only -I"$prefix/include/troupe" "$work/all_headers.cpp" ||
  die "the installed headers do not compile together"

if grep -rl "$build" "$prefix/lib/cmake" "$prefix/lib/pkgconfig"; then die "the files above name the build tree"; fi
for f in "$prefix"/bin/* "$prefix"/lib/*.so; do
  if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -F "$build"; then die "$f has an RPATH into the build tree"; fi
done

# The six libraries, one per layer, are installed, and troupe.pc links each of them.
layers=(train actors ops graph devices core)
for layer in "${layers[@]}"; do
  [[ -f "$prefix/lib/libtroupe_$layer.so" ]] || die "libtroupe_$layer.so was not installed"
done
pc_libs=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --libs troupe)
[[ $(grep -oE -- '-ltroupe_[a-z]+' <<<"$pc_libs" | tr '\n' ' ') == "$(printf -- '-ltroupe_%s ' "${layers[@]}")" ]] ||
  die "troupe.pc's Libs do not list the six libraries, each before those it uses: $pc_libs"

# The installed programs find the libraries through their RPATH, and libtroupe_devices.so finds
# the CUDA module beside it (it loads, even where no GPU can run it).
demo=$("$prefix/bin/troupe-demo") || die "the installed troupe-demo failed"
if [[ -f "$build/lib/libtroupe_cuda.so" ]]; then
  [[ -f "$prefix/lib/libtroupe_cuda.so" ]] || die "libtroupe_cuda.so was built but not installed"
  if grep -q 'CUDA module not built\|cannot load CUDA module' <<<"$demo"; then
    die "the installed library does not load the installed CUDA module: $(grep '^GPU' <<<"$demo")"
  fi
fi

# The examples are built from copies inside $work, so that with ccache's base directory there
# every path a compile sees is relative and the same from run to run: cache hits.
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$work CCACHE_NOHASHDIR=1
fi
count=0
for dir in "$repo"/examples/*/; do
  name=$(basename "$dir")
  src=$work/src/$name bin=$work/build/$name
  mkdir -p "$work/src" && cp -r "$dir" "$src"
  say "$name: configure, build, run"
  cmake -S "$src" -B "$bin" "${generator[@]}" "${launcher[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
    >"$work/$name.configure.log" || { cat "$work/$name.configure.log"; die "$name: configure"; }
  found=$(sed -n 's/^Troupe_DIR:PATH=//p' "$bin/CMakeCache.txt")
  [[ "$found" == "$prefix/lib/cmake/Troupe" ]] || die "$name: found Troupe in '$found', not in $prefix"
  cmake --build "$bin" >"$work/$name.build.log" || { cat "$work/$name.build.log"; die "$name: build"; }
  [[ -x "$bin/$name" ]] || die "$name: no executable $name (each examples/NAME/ builds one named NAME)"
  (cd "$bin" && "./$name") || die "$name: the program exited with $?"
  count=$((count + 1))
done
((count > 0)) || die "no examples/*/ directory"

# The training example on a local cluster of 1 ps + 2 workers in each strategy, started by the
# installed troupe-launch (its troupe-node beside it).
for strategy in async sync allreduce; do
  say "train_residual: 1 ps + 2 workers, $strategy, through the installed troupe-launch"
  (cd "$work" && timeout 180 "$prefix/bin/troupe-launch" --ps 1 --workers 2 -- \
    "$work/build/train_residual/train_residual" --strategy "$strategy" --steps 200 --min-accuracy 0.8 \
    >"$work/train_residual.$strategy.log" 2>&1) ||
    { tail -40 "$work/train_residual.$strategy.log"; die "train_residual: the $strategy job failed"; }
  grep -q "^\[worker:0\] done: $strategy, global step" "$work/train_residual.$strategy.log" ||
    { tail -40 "$work/train_residual.$strategy.log"; die "train_residual: the $strategy job's chief did not finish"; }
done

# pkg-config instead of CMake, for the regression example.
say "regression through pkg-config"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
libdir=$(pkg-config --variable=libdir troupe)
cc=(g++)
if ((${#launcher[@]})); then cc=(ccache g++); fi
(cd "$work/src/regression" &&
  "${cc[@]}" -std=c++20 -c main.cpp -o "$work/regression_pc.o" $(pkg-config --cflags troupe) &&
  g++ "$work/regression_pc.o" -o "$work/regression_pc" $(pkg-config --libs troupe) -Wl,-rpath,"$libdir") ||
  die "regression: build through pkg-config"
"$work/regression_pc" >/dev/null || die "regression built through pkg-config: the program failed"
say "ok: $count example(s) built and run against $prefix"
