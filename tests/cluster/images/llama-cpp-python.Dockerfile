# The stand-in for ghcr.io/abetlen/llama-cpp-python (examples/runtimes/llama-cpp-server.yaml):
# llama-cpp-python[server] on the python base (images/base.sh python: Debian's python3 3.11). The
# context is a folder holding site-packages: tests/llm/setup.sh's .bench/llm-venv (llama.cpp built
# from source into the cached wheel, and its server's dependencies), with Debian's libgomp.so.1 beside
# llama.cpp's libraries (their RUNPATH is $ORIGIN; libgomp1 is not in the base). The runtime names
# its command, `python3 -m llama_cpp.server`, as the image's entrypoint does.
ARG BASE
FROM ${BASE}
COPY site-packages /usr/local/lib/python3.11/dist-packages
USER 65532:65532
ENTRYPOINT ["python3", "-m", "llama_cpp.server"]
