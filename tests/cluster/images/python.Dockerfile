# Python 3 from Debian's packages (images/base.sh python), for the test pods a KServe user would run
# as custom containers: the transformer and explainer of e2e-node.sh get their script as `-c`.
ARG BASE
FROM ${BASE}
USER 65532:65532
ENTRYPOINT ["python3"]
