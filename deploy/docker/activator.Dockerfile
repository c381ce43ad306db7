# syntax=docker/dockerfile:1.7
# skiff-activator: `serve` holds requests while a revision scales from zero (8012, admin 9090);
# `queue-proxy` is the sidecar in front of custom containers (the operator injects it).
#   docker build -f deploy/docker/activator.Dockerfile -t ghcr.io/skiff-serving/skiff-activator:0.1.0 .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skiff-activator --bin skiff-activator \
 && cp target/release/skiff-activator /skiff-activator

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /skiff-activator /usr/local/bin/skiff-activator
USER 65532:65532
EXPOSE 8012 9090
ENTRYPOINT ["/usr/local/bin/skiff-activator"]
