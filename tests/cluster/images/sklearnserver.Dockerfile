# The stand-in for kserve/sklearnserver (deploy/runtimes/kserve-sklearnserver.yaml): KServe's model
# server (kserve, scikit-learn, joblib) with bench/peers/kserve-runtimes' sklearnserver module, on
# the python base (images/base.sh python: Debian's python3 3.11). The context is a folder holding
# site-packages: the kserve-runtimes peer venv's (PEERS=kserve-runtimes bench/peers/setup.sh; its
# cp311 wheels run on Debian's 3.11) with the stand-in's modules added. Its entrypoint is KServe's
# image's: `python -m sklearnserver`, the runtime's args after it.
ARG BASE
FROM ${BASE}
COPY site-packages /usr/local/lib/python3.11/dist-packages
USER 65532:65532
ENTRYPOINT ["python3", "-m", "sklearnserver"]
