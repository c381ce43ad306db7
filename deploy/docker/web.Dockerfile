# syntax=docker/dockerfile:1.7
# skiff-web: the models web app (pages and API under APP_PREFIX, /models by default, on APP_PORT
# 5000; health at /models/healthz). Its script and stylesheet are built into the binary.
#   docker build -f deploy/docker/web.Dockerfile -t ghcr.io/skiff-serving/skiff-web:0.1.0 .
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
    cargo build --release --locked -p skiff-web --bin skiff-web \
 && cp target/release/skiff-web /skiff-web

# The binaries built on the host instead of in the build stage (tests/cluster/images.sh does this:
# the Rust toolchain image cannot be pulled there). The build context is then a folder holding them:
#   buildah build -f deploy/docker/web.Dockerfile --build-arg BASE=... --build-arg BINARIES=host DIR
FROM scratch AS host
COPY skiff-web /skiff-web

FROM ${BINARIES} AS binaries

FROM ${BASE}
COPY --from=binaries /skiff-web /usr/local/bin/skiff-web
USER 65532:65532
ENV APP_PORT=5000
EXPOSE 5000
ENTRYPOINT ["/usr/local/bin/skiff-web"]
