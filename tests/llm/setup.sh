#!/usr/bin/env bash
# Installs the real LLM server the tests run on CPU: llama.cpp's OpenAI-compatible server through
# llama-cpp-python[server] (PyPI), in .bench/llm-venv, and a tiny Llama model with random weights
# that tests/llm/tiny_gguf.py writes (about 4 MB, never downloaded), at .bench/llm/tiny-llama.gguf.
#
# llama-cpp-python comes from PyPI as source only, and building llama.cpp takes 11 minutes of CPU
# (about 6 on 2 idle cores; 33 measured on a busy 2-core machine), so the built wheel is cached in
# ${SKIFF_LLM_CACHE:-$HOME/.cache/skiff-llm}/wheels/<key>, where <key> hashes the pinned version,
# the build flags, the Python version and the CPU (as tests/stores/build.sh caches the Go builds):
# a rerun, or another checkout on the same machine, installs from that wheel in seconds.
# Idempotent: a venv whose stamp matches is left alone.
# Env: PYTHON (default python3; 3.9 or newer).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
cache="${SKIFF_LLM_CACHE:-$HOME/.cache/skiff-llm}"

LLAMA_CPP_PYTHON=0.3.36
# llama-cpp-python's own build flags (code for this CPU: the key names the CPU, so a cache carried
# to another machine is not used there).
CMAKE_FLAGS=""
REQS=("llama-cpp-python[server]==$LLAMA_CPP_PYTHON" gguf==0.19.0 numpy==2.4.6)
constraints="$here/constraints.txt"

pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
cpu="$(grep -m1 '^model name' /proc/cpuinfo || uname -m)"
key="$(printf '%s\n' "$LLAMA_CPP_PYTHON" "$CMAKE_FLAGS" "$pyver" "$cpu" | sha256sum | cut -c1-16)"
wheels="$cache/wheels/$key"
venv="$root/.bench/llm-venv"
model="$root/.bench/llm/tiny-llama.gguf"
stamp_want="$key ${REQS[*]} $(sha256sum "$constraints" "$here/tiny_gguf.py" | sha256sum | cut -c1-16)"

if [[ -f "$venv/.skiff-stamp" && "$(cat "$venv/.skiff-stamp")" == "$stamp_want" && -f "$model" ]]; then
  echo "llm setup: llama-cpp-python $LLAMA_CPP_PYTHON and the tiny model are ready in $venv" >&2
  exit 0
fi

if ! ls "$wheels"/llama_cpp_python-"$LLAMA_CPP_PYTHON"-*.whl >/dev/null 2>&1; then
  echo "llm setup: building llama-cpp-python $LLAMA_CPP_PYTHON (llama.cpp) into $wheels; 11 minutes of CPU, once per machine" >&2
  start=$SECONDS
  mkdir -p "$cache/wheels"
  tmp="$(mktemp -d "$cache/wheels/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" nice -n 10 \
    "$python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    -w "$tmp" "llama-cpp-python==$LLAMA_CPP_PYTHON"
  rm -rf "$wheels"
  mv "$tmp" "$wheels"
  trap - EXIT
  echo "llm setup: built in $((SECONDS - start))s" >&2
fi

mkdir -p "$root/.bench/llm"
if [[ ! -x "$venv/bin/python" ]]; then
  "$python" -m venv "$venv"
fi
rm -f "$venv/.skiff-stamp"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --find-links "$wheels" \
  --only-binary llama-cpp-python -c "$constraints" "${REQS[@]}"
"$venv/bin/python" -m pip check >/dev/null
"$venv/bin/python" "$here/tiny_gguf.py" "$model"
echo "$stamp_want" > "$venv/.skiff-stamp"
echo "llm setup: llama-cpp-python $LLAMA_CPP_PYTHON in $venv, the model at $model ($(du -k "$model" | cut -f1) KiB)" >&2
