# syntax=docker/dockerfile:1.7
# skiff-router: the Pingora ingress; it ships in the `skiff` binary until it has a Kubernetes mode of its own.
#   docker build -f deploy/docker/router.Dockerfile -t ghcr.io/skiff-serving/skiff-router:0.1.0 .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends cmake && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/src/target \
    cargo build --release --locked -p skiff --bin skiff \
 && cp target/release/skiff /skiff

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /skiff /usr/local/bin/skiff
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/skiff"]
