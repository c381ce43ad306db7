# The pod sandbox image (containerd's sandbox_image), built locally: no registry is reachable from
# the test machines. The context is a folder holding pause, a static binary built from pause.c.
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
