# syntax=docker/dockerfile:1.7
# skiff-controller: the operator (admin port 8081: /metrics, /healthz, /readyz).
#   docker build -f deploy/docker/controller.Dockerfile -t ghcr.io/skiff-serving/skiff-controller:0.1.0 .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skiff-operator --bin skiff-controller \
 && cp target/release/skiff-controller /skiff-controller

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /skiff-controller /usr/local/bin/skiff-controller
USER 65532:65532
EXPOSE 8081
ENTRYPOINT ["/usr/local/bin/skiff-controller"]
