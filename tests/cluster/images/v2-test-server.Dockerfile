# The test ServingRuntime's server (tests/fixtures/runtimes/v2-test-runtime.yaml): KServe's V2 REST
# protocol in Python's standard library, tests/fixtures/v2_server.py, on the python base
# (images/base.sh python). The context is a folder holding v2_server.py. The runtime gives it
# KServe's usual flags (--model_name, --model_dir=/mnt/models, --http_port).
ARG BASE
FROM ${BASE}
COPY v2_server.py /srv/v2_server.py
USER 65532:65532
ENTRYPOINT ["python3", "/srv/v2_server.py"]
