#!/usr/bin/env bash
# Start the MLServer peer: bench/peers/run_mlserver.sh PORT MODEL_DIR
# Serves MODEL_DIR/model.onnx (or MODEL_DIR itself if it is a .onnx file) as
# model "iris" through the custom runtime in bench/peers/mlserver/runtime.py.
# REST on 127.0.0.1:PORT, gRPC on PORT+1, metrics on PORT+2; everything else
# is MLServer's default (parallel_workers=1, adaptive batching off, ...).
# Config is rewritten on each start into ${TMPDIR:-/tmp}/skiff-mlserver-PORT
# ($MLSERVER_WORKDIR to choose another folder).
# Needs bench/peers/setup.sh to have been run. Execs, so the PID is the server's.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 PORT MODEL_DIR" >&2
  exit 2
fi
port=$1
model_dir=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${MLSERVER_VENV:-$root/.bench/mlserver-venv}
if [ ! -x "$venv/bin/mlserver" ]; then
  echo "run_mlserver.sh: no MLServer venv at $venv; run bench/peers/setup.sh first" >&2
  exit 1
fi
if [ -f "$model_dir" ]; then
  model=$(cd "$(dirname "$model_dir")" && pwd)/$(basename "$model_dir")
else
  model=$(cd "$model_dir" && pwd)/model.onnx
fi
if [ ! -f "$model" ]; then
  echo "run_mlserver.sh: no model at $model" >&2
  exit 1
fi
name=${MODEL_NAME:-iris}
host=${SKIFF_PEER_HOST:-127.0.0.1}
work=${MLSERVER_WORKDIR:-${TMPDIR:-/tmp}/skiff-mlserver-$port}
rm -rf "$work"
mkdir -p "$work/$name"
cat > "$work/settings.json" <<JSON
{
  "host": "$host",
  "http_port": $port,
  "grpc_port": $((port + 1)),
  "metrics_port": $((port + 2)),
  "metrics_dir": "$work/.metrics",
  "environments_dir": "$work/.envs"
}
JSON
cat > "$work/$name/model-settings.json" <<JSON
{
  "name": "$name",
  "implementation": "runtime.OnnxRuntimeModel",
  "parameters": {"uri": "$model"}
}
JSON
export PYTHONPATH="$here/mlserver${PYTHONPATH:+:$PYTHONPATH}"
cd "$work"
exec "$venv/bin/mlserver" start "$work"
