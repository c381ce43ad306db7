# syntax=docker/dockerfile:1.7
# skiff-fetch and skiff-model-cache, from one build (two final stages):
#   docker build -f deploy/docker/fetch.Dockerfile --target fetch       -t ghcr.io/skiff-serving/skiff-fetch:0.1.0 .
#   docker build -f deploy/docker/fetch.Dockerfile --target model-cache -t ghcr.io/skiff-serving/skiff-model-cache:0.1.0 .
# skiff-fetch is the model pods' init container (`storage-initializer`: URI DIR [--node-cache URL]);
# skiff-model-cache is the node cache DaemonSet (deploy/node-cache), listening on 8095 behind its node-local Service.
# The runtime stage's base: distroless cc (glibc, libstdc++, CA certificates, user 65532 "nonroot").
# The tests build it from Debian's packages (tests/cluster/images/base.sh) and pass it as BASE.
# Digest (multi-arch OCI index) from NDDev-OpenNetwork/pi-setup-system Dockerfile (also chrisbennight/mcp-unifi-rs Dockerfile)
ARG BASE=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
# Where the binaries come from: `build` (the Rust stage below) or `host` (built on the host: see README.md).
ARG BINARIES=build

# Digest (multi-arch index) from TerminallyLazy/tree-ring-memory-agent-zero .github/workflows/build-bundled-binaries.yml
FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skiff-fetch --bin skiff-fetch --bin skiff-model-cache \
 && cp target/release/skiff-fetch target/release/skiff-model-cache /

# The binaries built on the host instead of in the build stage (tests/cluster/images.sh does this:
# the Rust toolchain image cannot be pulled there). The build context is then a folder holding them:
#   buildah build -f deploy/docker/fetch.Dockerfile --build-arg BASE=... --build-arg BINARIES=host DIR
FROM scratch AS host
COPY skiff-model-cache /skiff-model-cache
COPY skiff-fetch /skiff-fetch

FROM ${BINARIES} AS binaries

FROM ${BASE} AS model-cache
COPY --from=binaries /skiff-model-cache /usr/local/bin/skiff-model-cache
USER 65532:65532
EXPOSE 8095
ENTRYPOINT ["/usr/local/bin/skiff-model-cache"]

# The last stage is what a build without --target gives: the init container.
FROM ${BASE} AS fetch
COPY --from=binaries /skiff-fetch /usr/local/bin/skiff-fetch
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/skiff-fetch"]
