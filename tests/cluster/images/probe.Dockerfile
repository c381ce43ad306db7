# A pod that checks whether it can open a TCP connection (tcpcheck IP PORT): the NetworkPolicy
# checks of e2e-node.sh. The context is a folder holding tcpcheck, built static from tcpcheck.c.
FROM scratch
COPY tcpcheck /tcpcheck
USER 65532:65532
ENTRYPOINT ["/tcpcheck"]
