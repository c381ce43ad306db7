#!/usr/bin/env bash
# Builds Skiff's container images from deploy/docker/ with buildah, on a base made from Debian's
# packages (images/base.sh: the stand-in for distroless cc, imported as localhost/skiff-base:<key>),
# plus the node's CoreDNS (images/coredns.Dockerfile) and pod sandbox (images/pause.c), and exports each as an OCI archive that
# `ctr -n k8s.io images import` takes. The Rust build stage needs the rust image, which cannot be
# pulled here, so the binaries come from this checkout's target/<profile>/ (BINARIES=host; see
# deploy/docker/README.md); what is built and run is each Dockerfile's runtime stage as shipped:
# its base, user, paths, entrypoint, and for skiff-server ONNX Runtime's library beside the binary.
#
#   tests/cluster/images.sh OUT_DIR            # writes OUT_DIR/<image>.tar; prints one image reference a line
#   tests/cluster/images.sh OUT_DIR runtimes   # the model servers the runtime tests run instead
#
# The runtimes set (e2e-runtimes.sh; no other script pays for it): skiff-v2-test-server
# (tests/fixtures/v2_server.py), skiff-sklearnserver (the kserve-runtimes peer venv's packages and
# bench/peers/kserve-runtimes: PEERS=kserve-runtimes bench/peers/setup.sh) and
# skiff-llama-cpp-python (tests/llm/setup.sh's .bench/llm-venv), each on the python base.
#
# A set of archives is kept in ~/.cache/skiff-images/sets/<key> (runtimes-<key> for the runtimes;
# hard links), <key> hashing the binaries' sizes and times (the runtimes: the venvs' stamps, their
# installed distributions and the servers' sources), the Dockerfiles, the set's own files of
# tests/cluster/images/ and this script: the next run with the same inputs takes them from there.
#
# Environment: SKIFF_IMAGES_PROFILE (debug: target/debug, or release); SKIFF_IMAGES_TAG (e2e);
# ORT_DYLIB_PATH (ONNX Runtime's library; from .ort/env when unset). Needs root (buildah's storage).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: images.sh OUT_DIR [runtimes]}"
what="${2:-skiff}"
profile="${SKIFF_IMAGES_PROFILE:-debug}"
tag="${SKIFF_IMAGES_TAG:-e2e}"
bins="$root/target/$profile"
t0=$SECONDS
log() { printf '[images %4ss] %s\n' "$((SECONDS - t0))" "$*" >&2; }
die() { echo "images.sh: error: $*" >&2; exit 1; }

command -v buildah >/dev/null || die "buildah not found (scripts/setup.sh installs it)"
runtimes_site="$root/.bench/kserve-runtimes-venv/lib/python3.11/site-packages"
llm_site="$root/.bench/llm-venv/lib/python3.11/site-packages"
libgomp=/usr/lib/x86_64-linux-gnu/libgomp.so.1
case "$what" in
  skiff)
    if [[ -z "${ORT_DYLIB_PATH:-}" && -f "$root/.ort/env" ]]; then
      # shellcheck source=/dev/null
      source "$root/.ort/env"
    fi
    [[ -f "${ORT_DYLIB_PATH:-}" ]] || die "ORT_DYLIB_PATH is not set to ONNX Runtime's library (run scripts/setup.sh)"
    ;;
  runtimes)
    [[ -d "$runtimes_site/kserve" && -d "$runtimes_site/sklearn" ]] ||
      die "$runtimes_site has no kserve or scikit-learn: run PEERS=kserve-runtimes bench/peers/setup.sh"
    [[ -d "$llm_site/llama_cpp" ]] || die "$llm_site has no llama_cpp: run tests/llm/setup.sh"
    [[ -f "$libgomp" ]] || die "$libgomp is missing (Debian's libgomp1: llama.cpp's OpenMP runtime)"
    ;;
  *) die "unknown set '$what' (the default, or runtimes)" ;;
esac
mkdir -p "$out"

# --- a set built before from the same inputs is reused: binaries by size and time, the rest by content
sets="${SKIFF_IMAGES_CACHE:-$HOME/.cache/skiff-images}/sets"
inputs() {
  local b site
  if [[ "$what" == runtimes ]]; then
    # The venvs: the stamps of their setup scripts, and every distribution installed, by name and version.
    cat "$root/.bench/kserve-runtimes-venv/.skiff-stamp" "$root/.bench/llm-venv/.skiff-stamp" 2>/dev/null || true
    for site in "$runtimes_site" "$llm_site"; do
      (cd "$site" && ls -d ./*.dist-info)
    done
    stat -c '%n %s %Y' "$(realpath "$libgomp")" "$llm_site"/llama_cpp/lib/*.so
    sha256sum "$root"/tests/fixtures/v2_server.py "$root"/bench/peers/kserve-runtimes/*.py "$root"/bench/peers/kserve-runtimes/*/*.py
    return
  fi
  for b in $(sed -n 's/^COPY \(skiff-[a-z-]*\) \/.*/\1/p' "$root"/deploy/docker/*.Dockerfile | sort -u); do
    stat -c '%n %s %Y' "$bins/$b" 2>/dev/null || echo "$b missing"
  done
  stat -c '%n %s %Y' "$(realpath "$ORT_DYLIB_PATH")" "$coredns"
  sha256sum "$root"/deploy/docker/*
}
# Each set hashes its own files of images/ (the runtimes: theirs and base.sh; the default: all the
# others), so that a change to one set's Dockerfiles leaves the other set's key alone.
runtime_files=(v2-test-server.Dockerfile sklearnserver.Dockerfile llama-cpp-python.Dockerfile)
prefix="$what-"
own_files=("$here/images/base.sh" "${runtime_files[@]/#/$here/images/}")
if [[ "$what" == skiff ]]; then
  prefix=""
  coredns="$("$here/build.sh")/coredns"
  own_files=()
  for f in "$here"/images/*; do
    [[ " ${runtime_files[*]} " == *" ${f##*/} "* ]] || own_files+=("$f")
  done
fi
key="$prefix$(
  {
    echo "$tag"
    inputs
    sha256sum "${own_files[@]}" "$here/images.sh" # one key however the script was called
  } | sha256sum | cut -c1-16
)"
if [[ -f "$sets/$key/done" ]]; then
  for tar in "$sets/$key"/*.tar; do
    name="${tar##*/}"
    ln -f "$tar" "$out/$name" 2>/dev/null || cp "$tar" "$out/$name"
    echo "localhost/${name%.tar}:$tag"
  done
  log "the images of set $key (same inputs, Dockerfiles and bases), from $sets"
  exit 0
fi

# --- the bases: Debian root file systems, imported once per key -----------------------------------
# import_base FLAVOUR: images/base.sh's root file system as localhost/skiff-FLAVOUR:<key>; prints it.
import_base() {
  local tar key ref ctr
  tar="$("$here/images/base.sh" "$1")"
  key="${tar##*/"$1"-}"
  key="${key%.tar}"
  ref="localhost/skiff-$1:$key"
  if ! buildah inspect --type image "$ref" >/dev/null 2>&1; then
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$tar" / >/dev/null
    # distroless's image config: user nonroot, its home as the working directory, the CA bundle.
    buildah config --user 65532:65532 --workingdir /home/nonroot \
      --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt "$ctr"
    buildah commit --quiet --rm "$ctr" "$ref" >/dev/null
    log "imported $ref"
  fi
  echo "$ref"
}

# --- the builders --------------------------------------------------------------------------------
ctx="$(mktemp -d)"
# buildah 1.28 leaves a working container behind for a stage that is only FROM another one (the
# `binaries` stage): remove those this run made.
containers_before="$(buildah containers -q | sort)"
drop_containers() {
  comm -13 <(echo "$containers_before") <(buildah containers -q | sort) | xargs -r buildah rm >/dev/null 2>&1 || true
}
trap 'rm -rf "$ctx"; drop_containers' EXIT
# build DOCKERFILE IMAGE [TARGET]: the runtime stage with the host's binaries as the context.
build() {
  local file="$1" image="$2" target="${3:-}" ref="localhost/$2:$tag" b
  rm -rf "${ctx:?}"/*
  for b in $(sed -n 's/^COPY \(skiff-[a-z-]*\) \/.*/\1/p' "$root/deploy/docker/$file"); do
    [[ -x "$bins/$b" ]] || die "missing target/$profile/$b: run \`cargo build --workspace\` first"
    cp "$bins/$b" "$ctx/"
  done
  cp "$ORT_DYLIB_PATH" "$ctx/libonnxruntime.so"
  buildah build --quiet --layers=false -f "$root/deploy/docker/$file" ${target:+--target "$target"} \
    --build-arg BASE="$base" --build-arg BINARIES=host --build-arg ONNXRUNTIME=host \
    -t "$ref" "$ctx" >/dev/null
  rm -f "$out/$image.tar"
  buildah push --quiet --disable-compression "$ref" "oci-archive:$out/$image.tar:$ref" >/dev/null
  log "$ref <- deploy/docker/$file${target:+ --target $target}"
  echo "$ref"
}
# own DOCKERFILE IMAGE [BUILD-ARG...]: builds localhost/IMAGE:$tag from images/DOCKERFILE with
# $ctx as the context (filled by the caller) and exports it like the others.
own() {
  local file="$1" image="$2" ref="localhost/$2:$tag" arg args=()
  shift 2
  for arg in "$@"; do args+=(--build-arg "$arg"); done
  buildah build --quiet --layers=false -f "$here/images/$file" "${args[@]}" -t "$ref" "$ctx" >/dev/null
  rm -f "$out/$image.tar"
  buildah push --quiet --disable-compression "$ref" "oci-archive:$out/$image.tar:$ref" >/dev/null
  log "$ref <- tests/cluster/images/$file"
  echo "$ref"
  rm -rf "${ctx:?}"/*
}

if [[ "$what" == runtimes ]]; then
  # --- the model servers of the runtime tests, on the python base ---------------------------------
  python_base="$(import_base python)"
  cp "$root/tests/fixtures/v2_server.py" "$ctx/"
  own v2-test-server.Dockerfile skiff-v2-test-server BASE="$python_base"
  # The venvs' site-packages, hard-linked (cp -l) where the file system allows; the host's .pth files
  # (the stand-ins' folder, setuptools' distutils hack) are replaced by the modules themselves.
  cp -al "$runtimes_site" "$ctx/site-packages" 2>/dev/null || cp -a "$runtimes_site" "$ctx/site-packages"
  rm -f "$ctx"/site-packages/*.pth
  cp -r "$root"/bench/peers/kserve-runtimes/{skiff_kserve_runtime.py,sklearnserver} "$ctx/site-packages/"
  own sklearnserver.Dockerfile skiff-sklearnserver BASE="$python_base"
  cp -al "$llm_site" "$ctx/site-packages" 2>/dev/null || cp -a "$llm_site" "$ctx/site-packages"
  rm -f "$ctx"/site-packages/*.pth
  cp "$libgomp" "$ctx/site-packages/llama_cpp/lib/libgomp.so.1"
  own llama-cpp-python.Dockerfile skiff-llama-cpp-python BASE="$python_base"
else
  # --- one image per runtime stage, and the node's and the tests' own images ----------------------
  base="$(import_base base)"
  build server.Dockerfile skiff-server
  build controller.Dockerfile skiff-controller
  build router.Dockerfile skiff-router
  build activator.Dockerfile skiff-activator
  build web.Dockerfile skiff-web
  build fetch.Dockerfile skiff-fetch fetch
  build fetch.Dockerfile skiff-model-cache model-cache

  # The node's: CoreDNS (build.sh's binary) and the pod sandbox.
  rm -rf "${ctx:?}"/*
  cp "$coredns" "$ctx/coredns"
  own coredns.Dockerfile skiff-coredns BASE="$base"
  gcc -static -Os -o "$ctx/pause" "$here/images/pause.c"
  own pause.Dockerfile skiff-pause
  # Custom containers: python3, for the transformer and explainer of KServe's contract.
  own python.Dockerfile skiff-python BASE="$(import_base python)"
  # The NetworkPolicy checks' client.
  gcc -static -Os -o "$ctx/tcpcheck" "$here/images/tcpcheck.c"
  own probe.Dockerfile skiff-probe
fi
# Each run re-tags the images: drop the ones no tag names any more, so buildah's storage stays put.
buildah rmi --prune >/dev/null 2>&1 || true

# --- keep this set for the next run with the same inputs (the newest two of its kind are kept) ------
rm -rf "$sets/$key.tmp"
mkdir -p "$sets/$key.tmp"
for tar in "$out"/*.tar; do
  ln -f "$tar" "$sets/$key.tmp/" 2>/dev/null || cp "$tar" "$sets/$key.tmp/"
done
touch "$sets/$key.tmp/done"
rm -rf "${sets:?}/$key"
mv "$sets/$key.tmp" "$sets/$key"
# shellcheck disable=SC2012 # names are hex keys
ls -1td "$sets/$prefix"[0-9a-f]*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
