# syntax=docker/dockerfile:1.7
# skiff-server: the embedded ONNX Runtime model server (KServe V1 and V2 REST on 8080).
#   docker build -f deploy/docker/server.Dockerfile -t ghcr.io/skiff-serving/skiff-server:0.1.0 .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skiff-server --bin skiff-server \
 && cp target/release/skiff-server /skiff-server

# ONNX Runtime's shared library from the PyPI wheel (ort 2.0.0-rc.15 is built for 1.31; it needs only libc and libstdc++).
FROM python:3.12-slim-bookworm AS onnxruntime
ARG ORT_VERSION=1.31.1
RUN pip install --no-cache-dir --no-deps --target /ort "onnxruntime==${ORT_VERSION}" \
 && cp /ort/onnxruntime/capi/libonnxruntime.so.${ORT_VERSION} /libonnxruntime.so

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=onnxruntime /libonnxruntime.so /usr/lib/skiff/libonnxruntime.so
COPY --from=build /skiff-server /usr/local/bin/skiff-server
ENV ORT_DYLIB_PATH=/usr/lib/skiff/libonnxruntime.so
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/skiff-server"]
