#!/usr/bin/env bash
# A local Kubernetes cluster with Skiff installed, for trying Skiff and for the cluster end-to-end
# tests (tests/cluster/e2e-*.sh).
#
#   scripts/local-cluster.sh up       # control plane + node, kubectl apply -k deploy/base, wait
#   scripts/local-cluster.sh node     # control plane + the real node and CoreDNS, Skiff's images
#                                     # imported but nothing of Skiff applied (for a test or a user
#                                     # that installs the parts itself, as e2e-operator.sh does)
#   scripts/local-cluster.sh status   # the pods of skiff-system and the router's address
#   scripts/local-cluster.sh down     # stop everything (safe to run twice)
#
# `up` builds no Rust (run `cargo build --workspace` first; `cargo build --release --bins` for
# release binaries, which are used when all five Skiff binaries are there). It starts the real
# control plane of tests/cluster (its Go build is cached in ~/.cache/skiff-cluster: about 15
# minutes the first time) and the node of tests/cluster/node.sh, as a user's cluster has it: the kubelet
#   and kube-proxy of Kubernetes v1.35.8, containerd and runc, the CNI bridge, CoreDNS as the
#   cluster DNS and kube-router enforcing NetworkPolicies. Skiff's images are built from
#   deploy/docker/ on a Debian base (tests/cluster/images.sh, with this checkout's binaries; tag
#   $SKIFF_LOCAL_TAG) and deploy/base is applied through a kustomize overlay whose only changes are
#   `images:` and the model pods' images in inferenceservice-config. Every Skiff pod runs its image
#   as uid 65532 with the manifests' securityContext. The router is its Service's ClusterIP
#   (kube-proxy's rules reach it from the host). Needs buildah, containerd, runc, mmdebstrap and
#   iptables (scripts/setup.sh installs them).
#
# Needs root, kubectl, go (the first time), ip, curl, and ONNX Runtime (scripts/setup.sh;
# .ort/env is sourced). One real node runs at a time on a machine (the tests take
# /tmp/skiff-cluster.lock).
#
# Environment (all optional):
#   SKIFF_CLUSTER_DIR          state, logs                                           (/tmp/skiff-local-cluster)
#   SKIFF_APISERVER_PORT, SKIFF_ETCD_PORT (and +1), SKIFF_KCM_PORT, SKIFF_SCHEDULER_PORT
#                              control plane ports                                   (6743, 2679, 10557, 10559)
#   SKIFF_LOCAL_TAG            real: the images' tag (localhost/<image>:<tag>)       (local)
#   SKIFF_LOCAL_PROFILE        release or debug                                      (release if built, else debug)
#   SKIFF_LOCAL_READY_TIMEOUT  seconds to wait for every skiff-system pod to be Ready (180)
#   SKIFF_STOP_GRACE           seconds down waits before SIGKILL                     (30)
#   KEEP_STATE=1               down keeps the state dir (logs)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-local-cluster}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-6743}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2679}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10557}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10559}"
export SKIFF_STOP_GRACE="${SKIFF_STOP_GRACE:-30}"
dir="$SKIFF_CLUSTER_DIR"
ready_timeout="${SKIFF_LOCAL_READY_TIMEOUT:-180}"
tag="${SKIFF_LOCAL_TAG:-local}"
cluster="$root/tests/cluster"
system_ns=skiff-system
skiff_bins=(skiff-controller skiff-router skiff-activator skiff-server skiff-web)

t0=$SECONDS
log() { printf '[local-cluster %4ss] %s\n' "$((SECONDS - t0))" "$*"; }
die() {
  echo "local-cluster: error: $*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}

k() { kubectl --kubeconfig "$dir/admin.kubeconfig" --request-timeout=20s "$@"; }

# True while a process started by tests/cluster/up.sh from $dir is alive.
running() {
  local f
  compgen -G "$dir/pids/*.pid" >/dev/null || return 1
  for f in "$dir"/pids/*.pid; do
    kill -0 "$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

# The router's address: its Service's ClusterIP:80 (kube-proxy's rules reach it from the host).
router_addresses() {
  echo "$(k -n "$system_ns" get svc skiff-router -o jsonpath='{.spec.clusterIP}'):80"
}

# Stops the control plane and the node, and removes the state (unless KEEP_STATE=1). The node's
# containers, mounts, bridge and iptables chains go with `node.sh clean`, which needs the state dir.
stop_cluster() {
  # No pod is drained here (node.sh clean kills the containers), so the grace is only the API
  # server's, which waits on the still-running Skiff pods' requests.
  SKIFF_STOP_GRACE=10 KEEP_STATE=1 "$cluster/down.sh"
  "$cluster/node.sh" clean
  [[ "${KEEP_STATE:-0}" == 1 ]] || rm -rf "$dir"
}

cmd_down() {
  if [[ -d "$dir" ]]; then
    log "stopping the cluster in $dir"
    stop_cluster
    log "down: no process, network namespace, veth or bridge left"
  else
    log "no cluster state in $dir: nothing to stop"
  fi
}

# Prints the pods of skiff-system that are not Ready, with their state and log tails.
explain_not_ready() {
  local pod c f
  k -n "$system_ns" get pods -o wide 2>&1 | sed 's/^/    /' >&2
  for pod in $(k -n "$system_ns" get pods -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 != "True" {print $1}'); do
    echo "---- pod $pod is not Ready:" >&2
    k -n "$system_ns" get pod "$pod" -o jsonpath='{range .status.containerStatuses[*]}    {.name}: ready={.ready} restarts={.restartCount} state={.state} last={.lastState.terminated.reason}/{.lastState.terminated.exitCode}{"\n"}{end}' >&2 || true
    for c in $(k -n "$system_ns" get pod "$pod" -o jsonpath='{.spec.containers[*].name}'); do
      echo "---- $pod/$c (last 20 lines)" >&2
      k -n "$system_ns" logs "$pod" -c "$c" --tail=20 >&2 2>/dev/null || echo "    (no log yet)" >&2
    done
  done
  echo "---- events (last 15)" >&2
  k -n "$system_ns" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 >&2 || true
}

cmd_status() {
  if [[ ! -f "$dir/admin.kubeconfig" ]] || ! running; then
    die "no cluster running from $dir (scripts/local-cluster.sh up)"
  fi
  k get nodes
  k -n "$system_ns" get deployments,pods -o wide
  echo "export KUBECONFIG=$dir/admin.kubeconfig"
  echo "router: $(router_addresses | tr '\n' ' ')"
}

# The real node: Skiff's images, up.sh with node.sh as the node, CoreDNS, then deploy/base through
# an overlay that only names the local images.
start_real_node() {
  start_real_cluster
  install_skiff
}

# The control plane and the real node (Skiff's images imported into its containerd) with CoreDNS.
start_real_cluster() {
  local tool bin start
  for tool in buildah containerd runc ctr mmdebstrap iptables; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/setup.sh installs the node's packages)"
  done
  mkdir -p "$dir"
  echo real >"$dir/node-kind"
  start=$SECONDS
  bin="$("$cluster/build.sh")"
  SKIFF_IMAGES_PROFILE="$profile" SKIFF_IMAGES_TAG="$tag" "$cluster/images.sh" "$dir/images" >/dev/null ||
    die "tests/cluster/images.sh failed"
  log "images localhost/<image>:$tag from deploy/docker/ with target/$profile's binaries ($((SECONDS - start)) s)"
  # Pods reach the API server through the kubernetes Service, which kube-proxy sends to the
  # advertised address: the API server listens on every address and advertises the node's.
  SKIFF_NODE_IP="$(ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')"
  export SKIFF_NODE_IP SKIFF_ADVERTISE_ADDRESS="$SKIFF_NODE_IP" SKIFF_APISERVER_ARGS="--bind-address=0.0.0.0"
  export SKIFF_CLUSTER_BIN="$bin" SKIFF_NODE_IMAGES="$dir/images" SKIFF_NODE_PAUSE_IMAGE="localhost/skiff-pause:$tag"
  export SKIFF_NODE_COMMAND="$cluster/node.sh run" SKIFF_NODE_TIMEOUT=180
  log "starting the control plane and the node (tests/cluster/up.sh, node.sh)"
  "$cluster/up.sh" 2>&1 | sed 's/^/    /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "tests/cluster/up.sh failed (state and logs kept in $dir; scripts/local-cluster.sh down)"
  sed "s|localhost/skiff-coredns:e2e|localhost/skiff-coredns:$tag|" "$cluster/manifests/coredns.yaml" | k apply -f - >/dev/null ||
    die "applying CoreDNS failed"
  k -n kube-system rollout status deploy/coredns --timeout=120s >/dev/null || die "CoreDNS is not Ready"
  log "CoreDNS Ready behind kube-dns 10.96.0.10"
}

# deploy/base through an overlay that only names the local images.
install_skiff() {
  local overlay="$dir/skiff" skiff_config name
  mkdir -p "$overlay"
  skiff_config="$(python3 - "$root/deploy/base/config.yaml" "$tag" <<'PY'
import json, re, sys
text, tag = open(sys.argv[1]).read(), sys.argv[2]
block = re.search(r"^  skiff: \|-\n((?:    .*\n)+)", text, re.M).group(1)
skiff = json.loads(block)
for key in ("serverImage", "queueProxyImage", "fetchImage"):
    name = skiff[key].rsplit("/", 1)[1].split(":")[0]
    skiff[key] = f"localhost/{name}:{tag}"
print(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inferenceservice-config"},
                  "data": {"skiff": json.dumps(skiff)}}))
PY
)"
  {
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "resources: [$(realpath --relative-to="$overlay" "$root/deploy/base")]"
    echo "images:"
    for name in skiff-controller skiff-router skiff-activator skiff-web; do
      echo "  - {name: ghcr.io/skiff-serving/$name, newName: localhost/$name, newTag: $tag}"
    done
    echo "patches:"
    echo "  - target: {kind: ConfigMap, name: inferenceservice-config}"
    echo "    patch: '$skiff_config'"
  } >"$overlay/kustomization.yaml"
  log "kubectl apply -k $overlay (deploy/base with the local images)"
  k apply -k "$overlay" 2>&1 | sed 's/^/    /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "kubectl apply -k $overlay failed (the cluster is left running: scripts/local-cluster.sh down)"
}

# Checks shared by up and node: root, the tools, this checkout's binaries (sets $profile) and ONNX
# Runtime; then removes the state a failed run left.
prepare() {
  [[ "$(id -u)" == 0 ]] || die "a node needs root (containerd and iptables)"
  local tool
  for tool in kubectl ip curl; do
    command -v "$tool" >/dev/null || die "$tool not found on PATH"
  done
  if running; then
    die "a cluster from $dir is already running (scripts/local-cluster.sh down first, or set SKIFF_CLUSTER_DIR)"
  fi

  # --- binaries: this checkout's, release if all five are built, else debug ------------------------
  profile="${SKIFF_LOCAL_PROFILE:-}"
  local b missing=()
  if [[ -z "$profile" ]]; then
    profile=release
    for b in "${skiff_bins[@]}"; do
      [[ -x "$root/target/release/$b" ]] || profile=debug
    done
  fi
  [[ "$profile" == release || "$profile" == debug ]] || die "SKIFF_LOCAL_PROFILE must be release or debug"
  for b in "${skiff_bins[@]}"; do
    [[ -x "$root/target/$profile/$b" ]] || missing+=("target/$profile/$b")
  done
  ((${#missing[@]} == 0)) || die "missing ${missing[*]}: run \`cargo build --workspace\` first (or \`cargo build --release --bins\`)"
  if [[ -z "${ORT_DYLIB_PATH:-}" && -f "$root/.ort/env" ]]; then
    # shellcheck source=/dev/null
    source "$root/.ort/env"
  fi
  [[ -f "${ORT_DYLIB_PATH:-}" ]] || die "ORT_DYLIB_PATH is not set to ONNX Runtime's library (run scripts/setup.sh)"
  export ORT_DYLIB_PATH
  log "binaries: target/$profile ($(
    IFS=,
    echo "${skiff_bins[*]}"
  ))"

  # A state dir kept by a failed run would make up.sh a restart: start from nothing.
  if [[ -d "$dir" ]]; then
    log "removing the state left in $dir"
    KEEP_STATE=0 stop_cluster >/dev/null
  fi
}

cmd_node() {
  prepare
  start_real_cluster
  echo "export KUBECONFIG=$dir/admin.kubeconfig" >"$dir/env"
  log "the control plane and the real node are up in $((SECONDS - t0)) s; images localhost/<image>:$tag imported, nothing of Skiff applied"
}

cmd_up() {
  prepare
  start_real_node
  k wait --for=condition=Established crd/inferenceservices.serving.kserve.io --timeout=60s >/dev/null ||
    die "the InferenceService CRD is not Established"

  log "waiting up to ${ready_timeout}s for every pod in $system_ns to be Ready"
  local deadline=$((SECONDS + ready_timeout)) want have line
  while :; do
    # Every Deployment has as many Ready replicas as it asks for, and no pod is left over.
    want="$(k -n "$system_ns" get deployments -o jsonpath='{range .items[*]}{.spec.replicas}{"\n"}{end}' 2>/dev/null | awk '{s += $1} END {print s + 0}')"
    have="$(k -n "$system_ns" get pods -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True || true)"
    line="$(k -n "$system_ns" get pods --no-headers 2>/dev/null | wc -l)"
    if ((want > 0 && have == want && line == want)); then
      break
    fi
    if ((SECONDS >= deadline)); then
      explain_not_ready
      die "only $have of $want pods in $system_ns are Ready after ${ready_timeout}s (above: the pods that are not, with their logs; the cluster is left running: scripts/local-cluster.sh down)"
    fi
    sleep 1
  done
  k -n "$system_ns" get pods -o wide | sed 's/^/    /'

  local routers
  routers="$(router_addresses | tr '\n' ' ')"
  {
    echo "export KUBECONFIG=$dir/admin.kubeconfig"
    echo "export SKIFF_ROUTER=${routers%% *}"
  } >"$dir/env"
  log "Skiff is up in $((SECONDS - t0)) s: every pod in $system_ns is Ready"
  cat <<EOF

  export KUBECONFIG=$dir/admin.kubeconfig       # (or: source $dir/env)
  router: ${routers% }

  Try it (minReplicas 0: one pod first, none about 65 s after the last request, and a request brings one back):
    kubectl create namespace demo
    kubectl apply -f - <<'YAML'
    apiVersion: serving.kserve.io/v1beta1
    kind: InferenceService
    metadata: {name: iris, namespace: demo}
    spec:
      predictor:
        minReplicas: 0
        model:
          modelFormat: {name: onnx}
          storageUri: file://$root/examples/models/iris
    YAML
    kubectl -n demo wait --for=condition=Ready isvc/iris
    curl -H "Host: iris.demo.example.com" http://${routers%% *}/v2/models/iris/infer \\
      -d '{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'

  Logs: kubectl logs; the control plane's and the node's in $dir/logs/
  Stop: scripts/local-cluster.sh down
EOF
}

case "${1:-}" in
  up) cmd_up ;;
  node) cmd_node ;;
  down) cmd_down ;;
  status) cmd_status ;;
  -h | --help | help) usage 0 ;;
  *) usage 1 >&2 ;;
esac
