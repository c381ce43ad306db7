# CoreDNS for the test cluster's node (the binary from build.sh, coredns/), on the same base as
# Skiff's images (images/base.sh). The context is a folder holding coredns.
ARG BASE
FROM ${BASE}
COPY coredns /coredns
USER 65532:65532
EXPOSE 1053 1053/udp
ENTRYPOINT ["/coredns"]
