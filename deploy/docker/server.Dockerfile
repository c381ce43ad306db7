# syntax=docker/dockerfile:1.7
# skiff-server: the embedded ONNX Runtime model server (KServe V1 and V2 REST on 8080).
#   docker build -f deploy/docker/server.Dockerfile -t ghcr.io/skiff-serving/skiff-server:0.1.0 .
# The runtime stage's base: distroless cc (glibc, libstdc++, CA certificates, user 65532 "nonroot").
# The tests build it from Debian's packages (tests/cluster/images/base.sh) and pass it as BASE.
# Digest (multi-arch OCI index) from NDDev-OpenNetwork/pi-setup-system Dockerfile (also chrisbennight/mcp-unifi-rs Dockerfile)
ARG BASE=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
# Where the binaries come from: `build` (the Rust stage below) or `host` (built on the host: see README.md).
ARG BINARIES=build
# Where libonnxruntime.so comes from: `onnxruntime` (the PyPI wheel, below) or `host` (beside the host binaries).
ARG ONNXRUNTIME=onnxruntime

# Digest (multi-arch index) from TerminallyLazy/tree-ring-memory-agent-zero .github/workflows/build-bundled-binaries.yml
FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skiff-server --bin skiff-server \
 && cp target/release/skiff-server /skiff-server

# ONNX Runtime's shared library from the PyPI wheel (ort 2.0.0-rc.15 is built for 1.31; it needs only libc and libstdc++).
# pip installs only a wheel whose SHA-256 is listed in scripts/onnxruntime-requirements.txt (the cp312
# amd64 and arm64 wheels among them); ORT_VERSION must be the version that file pins.
# Digest (multi-arch index) from wassname/meatybroth Dockerfile
FROM python:3.12-slim-bookworm@sha256:782412e85d0f0984994c290652577d4018aff08145c85b262bb63dc0c7522254 AS onnxruntime
ARG ORT_VERSION=1.31.1
COPY scripts/onnxruntime-requirements.txt /tmp/onnxruntime-requirements.txt
RUN grep -q "^onnxruntime==${ORT_VERSION} " /tmp/onnxruntime-requirements.txt \
 && pip install --no-cache-dir --disable-pip-version-check --no-deps --only-binary=:all: --require-hashes \
      --target /ort -r /tmp/onnxruntime-requirements.txt \
 && cp /ort/onnxruntime/capi/libonnxruntime.so.${ORT_VERSION} /libonnxruntime.so

# The binaries built on the host instead of in the build stage (tests/cluster/images.sh does this:
# the Rust toolchain image cannot be pulled there). The build context is then a folder holding them:
#   buildah build -f deploy/docker/server.Dockerfile --build-arg BASE=... --build-arg BINARIES=host --build-arg ONNXRUNTIME=host DIR
FROM scratch AS host
COPY skiff-server /skiff-server
COPY libonnxruntime.so /libonnxruntime.so

FROM ${BINARIES} AS binaries

FROM ${ONNXRUNTIME} AS onnxruntime-lib

FROM ${BASE}
# Next to the binary: skiff-server finds it there without ORT_DYLIB_PATH (which still wins).
COPY --from=onnxruntime-lib /libonnxruntime.so /usr/local/bin/libonnxruntime.so
COPY --from=binaries /skiff-server /usr/local/bin/skiff-server
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/skiff-server"]
