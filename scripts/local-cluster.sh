#!/usr/bin/env bash
# A local Kubernetes cluster with Skiff installed, for trying Skiff and for the cluster end-to-end
# tests (tests/cluster/e2e-*.sh).
#
#   scripts/local-cluster.sh up       # control plane + node, kubectl apply -k deploy/base, wait
#   scripts/local-cluster.sh status   # the pods of skiff-system and the router's address
#   scripts/local-cluster.sh down     # stop everything (safe to run twice)
#
# `up` builds no Rust (run `cargo build --workspace` first; `cargo build --release --bins` for
# release binaries, which are used when all five Skiff binaries are there). It starts the real
# control plane of tests/cluster (its Go build is cached in ~/.cache/skiff-cluster: about 15
# minutes the first time) and a node, one of two kinds ($SKIFF_LOCAL_NODE):
#
# real (the default): the node of tests/cluster/node.sh, as a user's cluster has it: the kubelet
#   and kube-proxy of Kubernetes v1.35.8, containerd and runc, the CNI bridge, CoreDNS as the
#   cluster DNS and kube-router enforcing NetworkPolicies. Skiff's images are built from
#   deploy/docker/ on a Debian base (tests/cluster/images.sh, with this checkout's binaries; tag
#   $SKIFF_LOCAL_TAG) and deploy/base is applied through a kustomize overlay whose only changes are
#   `images:` and the model pods' images in inferenceservice-config. Every Skiff pod runs its image
#   as uid 65532 with the manifests' securityContext. The router is its Service's ClusterIP
#   (kube-proxy's rules reach it from the host). Needs buildah, containerd, runc, mmdebstrap and
#   iptables (scripts/setup.sh installs them).
#
# agent: the node agent of tests/node-agent (a kubelet written for the tests, being retired), which
#   runs every pod's containers as local processes in a network namespace of their own (bridge
#   $SKIFF_LOCAL_BRIDGE), as root, with no securityContext, kube-proxy or DNS. Its image map sends
#   Skiff's images to this checkout's binaries (ghcr.io/skiff-serving/<binary>:* ->
#   target/<profile>/<binary>) and image python-http to python3 ($SKIFF_CLUSTER_DIR/image-map.json;
#   reread at each container start). Pods reach the API server at the `kubernetes` Service address
#   (10.96.0.1:443), which the agent forwards; the router's address is a router pod's IP:8080. It
#   cannot run beside another node agent that forwards 10.96.0.1.
#
# Needs root, kubectl, go (the first time), ip, curl, and ONNX Runtime (scripts/setup.sh;
# .ort/env is sourced). One real node runs at a time on a machine (the tests take
# /tmp/skiff-cluster.lock).
#
# Environment (all optional):
#   SKIFF_LOCAL_NODE           real or agent                                         (real)
#   SKIFF_CLUSTER_DIR          state, logs                                           (/tmp/skiff-local-cluster)
#   SKIFF_APISERVER_PORT, SKIFF_ETCD_PORT (and +1), SKIFF_KCM_PORT, SKIFF_SCHEDULER_PORT
#                              control plane ports                                   (6743, 2679, 10557, 10559)
#   SKIFF_LOCAL_TAG            real: the images' tag (localhost/<image>:<tag>)       (local)
#   SKIFF_LOCAL_BRIDGE         agent: pod bridge (also the pods' netns prefix)      (skloc0)
#   SKIFF_LOCAL_POD_CIDR       agent: pod addresses                                  (10.244.8.0/22)
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
bridge="${SKIFF_LOCAL_BRIDGE:-skloc0}"
pod_cidr="${SKIFF_LOCAL_POD_CIDR:-10.244.8.0/22}"
ready_timeout="${SKIFF_LOCAL_READY_TIMEOUT:-180}"
node_kind="${SKIFF_LOCAL_NODE:-real}"
tag="${SKIFF_LOCAL_TAG:-local}"
cluster="$root/tests/cluster"
api_service_ip=10.96.0.1
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

# The router's address: its Service's ClusterIP:80 on a real node; else "ip:port" of every Ready
# router pod, one a line.
router_addresses() {
  if [[ "$(cat "$dir/node-kind" 2>/dev/null)" == real ]]; then
    echo "$(k -n "$system_ns" get svc skiff-router -o jsonpath='{.spec.clusterIP}'):80"
    return
  fi
  k -n "$system_ns" get pods -l app.kubernetes.io/name=skiff-router -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 == "True" && $1 != "" {print $1 ":8080"}'
}

# Kills what still runs in our pods' network namespaces and removes them, their veths and the
# bridge (what the agent does on SIGTERM; needed when it could not: SIGKILLed, crashed).
sweep_network() {
  local ns pid pids port left=0
  command -v ip >/dev/null || return 0
  for ns in $(ip netns list 2>/dev/null | awk -v p="$bridge-" 'index($1, p) == 1 {print $1}'); do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pids="$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
      [[ -n "${pids// /}" ]] || break
      for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
      sleep 0.2
    done
    ip netns del "$ns" 2>/dev/null || true
    left=$((left + 1))
  done
  if ip link show dev "$bridge" >/dev/null 2>&1; then
    for port in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{split($2, a, "@"); print a[1]}'); do
      ip link del dev "$port" 2>/dev/null || true
    done
    ip link del dev "$bridge" 2>/dev/null || true
    left=$((left + 1))
  fi
  ((left == 0)) || log "removed $left network namespace(s)/bridge left behind by the node agent"
}

# Stops the control plane and the node, and removes the state (unless KEEP_STATE=1). A real node's
# containers, mounts, bridge and iptables chains go with `node.sh clean`, which needs the state dir.
stop_cluster() {
  if [[ "$(cat "$dir/node-kind" 2>/dev/null)" == real ]]; then
    # No pod is drained here (node.sh clean kills the containers), so the grace is only the API
    # server's, which waits on the still-running Skiff pods' requests.
    SKIFF_STOP_GRACE=10 KEEP_STATE=1 "$cluster/down.sh"
    "$cluster/node.sh" clean
    [[ "${KEEP_STATE:-0}" == 1 ]] || rm -rf "$dir"
  else
    "$cluster/down.sh"
  fi
}

cmd_down() {
  if [[ -d "$dir" ]]; then
    log "stopping the cluster in $dir"
    stop_cluster
  else
    log "no cluster state in $dir: nothing to stop"
  fi
  sweep_network
  # Check that nothing is left: no namespace, veth or bridge of ours.
  local ns_left
  ns_left="$(ip netns list 2>/dev/null | awk -v p="$bridge-" 'index($1, p) == 1' | wc -l)"
  ((ns_left == 0)) || die "$ns_left network namespace(s) $bridge-* still exist"
  ! ip link show dev "$bridge" >/dev/null 2>&1 || die "bridge $bridge still exists"
  log "down: no process, network namespace, veth or bridge left"
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

# The node agent's node: its image map, then up.sh with the agent as the node.
start_agent_node() {
  local agent="$root/target/$profile/skiff-node-agent" holder python b map="$dir/image-map.json"
  # The node agent of the same build as the Skiff binaries (a stale one of the other profile would
  # run pods as an older agent did).
  [[ -x "$agent" ]] || die "no node agent (target/$profile/skiff-node-agent): run \`cargo build --workspace\` first"
  # The kubernetes Service address must be ours to forward.
  holder="$(ip -o addr show to "$api_service_ip/32" 2>/dev/null | awk '{print $2}' | grep -vx "$bridge" || true)"
  [[ -z "$holder" ]] || die "$api_service_ip is already on $holder (another node agent forwards the API: stop that cluster first)"
  sweep_network
  mkdir -p "$dir"
  # The interpreter itself, not a pyenv shim (a shim needs variables the pods do not get).
  python="$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)"
  {
    printf '{\n'
    for b in "${skiff_bins[@]}"; do
      printf '  "%s": "%s",\n' "$b" "$root/target/$profile/$b"
    done
    # Custom-container examples and tests use image python-http (args: -m http.server ...).
    printf '  "python-http": "%s"\n}\n' "${python:-/usr/bin/python3}"
  } >"$map"
  log "node agent ${agent#"$root"/}; image map $map"
  # The node's InternalIP is the bridge's address (the pod CIDR's first): the kubelet serving
  # certificate must name it, for the API server to reach the agent's log endpoint (kubectl logs,
  # the web app's Logs tab).
  export SKIFF_NODE_IP="${SKIFF_NODE_IP:-$(python3 -c 'import ipaddress, sys; print(ipaddress.ip_network(sys.argv[1], strict=False).network_address + 1)' "$pod_cidr")}"
  export SKIFF_NODE_AGENT="$agent --image-map $map --bridge $bridge --pod-cidr $pod_cidr \
--api-service-ip $api_service_ip --backoff-max-secs 10 --pass-env PATH,HOME,LANG,ORT_DYLIB_PATH"
  echo agent >"$dir/node-kind"
  log "starting the control plane and the node agent (tests/cluster/up.sh)"
  "$cluster/up.sh" 2>&1 | sed 's/^/    /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "tests/cluster/up.sh failed (it stopped what it started; state and logs kept in $dir)"
  grep -q "forwarding the kubernetes Service address" "$dir/logs/node-agent.log" ||
    die "the node agent does not forward $api_service_ip to the API server (see $dir/logs/node-agent.log): pods would have no API access"
  log "kubectl apply -k deploy/base"
  k apply -k "$root/deploy/base" 2>&1 | sed 's/^/    /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "kubectl apply -k deploy/base failed (the cluster is left running: scripts/local-cluster.sh down)"
}

# The real node: Skiff's images, up.sh with node.sh as the node, CoreDNS, then deploy/base through
# an overlay that only names the local images.
start_real_node() {
  local tool bin overlay skiff_config name start
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
  export SKIFF_NODE_AGENT="$cluster/node.sh run" SKIFF_NODE_TIMEOUT=180
  log "starting the control plane and the node (tests/cluster/up.sh, node.sh)"
  "$cluster/up.sh" 2>&1 | sed 's/^/    /'
  [[ "${PIPESTATUS[0]}" == 0 ]] || die "tests/cluster/up.sh failed (state and logs kept in $dir; scripts/local-cluster.sh down)"
  sed "s|localhost/skiff-coredns:e2e|localhost/skiff-coredns:$tag|" "$cluster/manifests/coredns.yaml" | k apply -f - >/dev/null ||
    die "applying CoreDNS failed"
  k -n kube-system rollout status deploy/coredns --timeout=120s >/dev/null || die "CoreDNS is not Ready"
  log "CoreDNS Ready behind kube-dns 10.96.0.10"

  overlay="$dir/skiff"
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

cmd_up() {
  [[ "$(id -u)" == 0 ]] || die "a node needs root (containerd and iptables, or the node agent's network namespaces)"
  [[ "$node_kind" == real || "$node_kind" == agent ]] || die "SKIFF_LOCAL_NODE must be real or agent"
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
  )); node: $node_kind"

  # A state dir kept by a failed run would make up.sh a restart: start from nothing.
  if [[ -d "$dir" ]]; then
    log "removing the state left in $dir"
    KEEP_STATE=0 stop_cluster >/dev/null
  fi
  "start_${node_kind}_node"
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
  down) cmd_down ;;
  status) cmd_status ;;
  -h | --help | help) usage 0 ;;
  *) usage 1 >&2 ;;
esac
