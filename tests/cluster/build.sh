#!/usr/bin/env bash
# Builds the local control plane (kube-apiserver, kube-controller-manager,
# kube-scheduler from k8s.io/kubernetes, plus our embedded etcd and pki helpers),
# the node's kubelet and kube-proxy (same module, same version), CoreDNS (from
# its Go module, coredns/) and kube-router (its Go module, kube-router/) into ${SKIFF_CLUSTER_CACHE:-$HOME/.cache/skiff-cluster}/bin/<key>,
# where <key> hashes go.mod, go.sum, the cmd/, coredns/ and kube-router/ sources, this script
# and the Go version.
# A rerun with the same inputs builds nothing. Prints the bin dir on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${SKIFF_CLUSTER_CACHE:-$HOME/.cache/skiff-cluster}"

k8s_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
[[ -n "$k8s_version" ]] || { echo "build.sh: no k8s.io/kubernetes version in go.mod" >&2; exit 1; }

key="$(
  cd "$here"
  {
    go version
    sha256sum go.mod go.sum build.sh coredns/go.mod coredns/go.sum kube-router/go.mod kube-router/go.sum
    find cmd coredns -type f -name '*.go' | LC_ALL=C sort | xargs sha256sum
  } | sha256sum | cut -c1-16
)"
bin="$cache/bin/$key"
if [[ -f "$bin/.complete" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache/bin"
tmp="$(mktemp -d "$cache/bin/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# Same version stamping as Kubernetes' hack/lib/version.sh, so /version and
# kubectl report the real release rather than v0.0.0-master.
minor="${k8s_version#v1.}"; minor="${minor%%.*}"
commit="$(curl -fsS --max-time 10 "https://proxy.golang.org/k8s.io/kubernetes/@v/$k8s_version.info" 2>/dev/null \
  | sed -n 's/.*"Hash":"\([0-9a-f]*\)".*/\1/p' || true)"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [[ -n "$commit" ]] && ldflags+=" -X $pkg.gitCommit=$commit"
done

echo "build.sh: building Kubernetes $k8s_version (control plane, kubelet, kube-proxy) and CoreDNS into $bin (with a cold Go cache this takes ~20 min on 2 cores)" >&2
start=$SECONDS
(
  cd "$here"
  export CGO_ENABLED=0
  nice -n 10 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy \
    ./cmd/etcd ./cmd/pki
  cd "$here/coredns"
  nice -n 10 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$tmp/coredns" .
  cd "$here/kube-router"
  nice -n 10 go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$tmp/kube-router" \
    github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
)
touch "$tmp/.complete"
rm -rf "$bin"
mv "$tmp" "$bin"
trap - EXIT
# Keep the three most recent builds (other checkouts may share this cache), drop older ones.
# shellcheck disable=SC2012 # names are hex keys
ls -1dt "$cache"/bin/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
echo "build.sh: built in $((SECONDS - start))s" >&2
echo "$bin"
