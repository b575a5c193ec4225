# Troupe's programs on Debian 12, without CUDA: troupe-node, troupe-launch, troupe-fashion-mnist
# and the others in /opt/troupe/bin (on PATH), for a cluster job in containers (deploy/README.md).
#   docker build -t troupe .        podman build -t troupe .        buildah bud -t troupe .
# BASE: the Debian 12 image both stages start from (a local one for a build without a registry,
# e.g. --build-arg BASE=localhost/debian-12). CCACHE_DIR: a ccache directory the builder mounts
# into the build (buildah bud -v ~/.cache/ccache:/ccache --build-arg CCACHE_DIR=/ccache), so that
# objects the same as a host build's are not compiled again; unset, no ccache.
ARG BASE=debian:12

FROM ${BASE} AS build
ARG CCACHE_DIR=
COPY . /src
WORKDIR /src
# The libraries and programs only: no tests, no benchmarks. The flags, build directory and
# ccache settings are tools/env.sh's, so that a mounted cache of a host build hits.
RUN bash tools/setup.sh --build-only
RUN set -eu; \
    launcher=; \
    if [ -n "$CCACHE_DIR" ]; then \
      launcher=-DCMAKE_CXX_COMPILER_LAUNCHER=ccache; \
      export CCACHE_BASEDIR=/src CCACHE_NOHASHDIR=1 \
             CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime; \
    fi; \
    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWITH_CUDA=OFF \
          -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCH=OFF $launcher; \
    cmake --build build -j"$(nproc)"; \
    cmake --install build --prefix /opt/troupe --strip

FROM ${BASE} AS runtime
# What the installed programs and libraries load (ldd), the data set troupe-fashion-mnist reads
# by default (/usr/share/datasets/fashion-mnist), and ssh for troupe-launch --hosts.
RUN apt-get update -q && \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libcaf-core0.17 libcaf-io0.17 libcaf-openssl0.17 libssl3 \
      libcapnp-0.9.2 libprotobuf32 libfmt9 zlib1g \
      libdnnl2 ocl-icd-libopencl1 libopenblas0-pthread libgomp1 \
      dataset-fashion-mnist openssh-client && \
    apt-get clean && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/troupe /opt/troupe
ENV PATH=/opt/troupe/bin:$PATH
# /checkpoints: where deploy/ mounts the job's shared checkpoint volume; a new named volume
# takes its owner from here.
RUN useradd --uid 1000 --create-home --shell /bin/bash troupe && \
    mkdir -p /work /checkpoints && chown troupe:troupe /work /checkpoints
USER troupe
WORKDIR /work
# A task's port in deploy/'s cluster specs.
EXPOSE 2222
CMD ["troupe-fashion-mnist", "--help"]
