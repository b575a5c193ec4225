# Sourced by tools/test.sh and tools/run.sh: the build settings the project always uses.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
TROUPE_BUILD_DIR=${TROUPE_BUILD_DIR:-build}

troupe_configure() {
  cmake -S . -B "$TROUPE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWITH_CUDA="${WITH_CUDA:-AUTO}" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
}

troupe_configure_and_build() {
  troupe_configure
  cmake --build "$TROUPE_BUILD_DIR" -j"$(nproc)" "$@"
}

# Builds (cmake --build arguments, e.g. --target programs) showing only its progress: "[n/m]"
# rewritten in place on a terminal, else a line at every tenth; the whole output goes to
# $TROUPE_BUILD_DIR/build.log, whose end is shown when the build fails.
troupe_build_with_progress() {
  local log=$TROUPE_BUILD_DIR/build.log tty=0
  [[ -t 1 ]] && tty=1
  if ! cmake --build "$TROUPE_BUILD_DIR" -j"$(nproc)" "$@" 2>&1 | tee "$log" | awk -v tty="$tty" '
      /^\[[0-9]+\/[0-9]+\]/ {
        split(substr($1, 2, length($1) - 2), a, "/"); n = a[1] + 0; m = a[2] + 0
        if (tty) printf "\r      %d of %d steps", n, m
        else if (m > 0 && int(n * 10 / m) > last) { last = int(n * 10 / m); printf "      %d of %d steps\n", n, m }
        fflush(); shown = 1 }
      /^ninja: no work to do/ { print "      nothing to rebuild"; fflush() }
      END { if (tty && shown) printf "\n" }'; then
    echo "the build failed; the end of $log:" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
}
