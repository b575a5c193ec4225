# Sourced by tools/test.sh and tools/run.sh: the build settings the project always uses.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
TROUPE_BUILD_DIR=${TROUPE_BUILD_DIR:-build}

troupe_configure_and_build() {
  cmake -S . -B "$TROUPE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWITH_CUDA="${WITH_CUDA:-AUTO}" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$TROUPE_BUILD_DIR" -j"$(nproc)" "$@"
}
