# syntax=docker/dockerfile:1.7
# skiff-router: the Pingora ingress in Kubernetes mode (watches InferenceServices and EndpointSlices;
# proxy on 8080, admin on 9090: /healthz, /readyz, /metrics).
#   docker build -f deploy/docker/router.Dockerfile -t ghcr.io/skiff-serving/skiff-router:0.1.0 .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# `--bin` alone finds the binary in whichever workspace member defines it.
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin skiff-router \
 && cp target/release/skiff-router /skiff-router

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /skiff-router /usr/local/bin/skiff-router
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/skiff-router"]
