#!/usr/bin/env bash
# Starts a local Kubernetes control plane for Skiff's cluster end-to-end tests:
# embedded etcd, kube-apiserver, kube-controller-manager and kube-scheduler, all
# on 127.0.0.1, with state (pki, etcd data, logs, pid files) in $SKIFF_CLUSTER_DIR.
# Optionally starts a node ($SKIFF_NODE_COMMAND, e.g. node.sh run) and waits for it to be Ready.
# Stop everything with down.sh.
#
# Environment (all optional):
#   SKIFF_CLUSTER_DIR       state dir                          (/tmp/skiff-cluster)
#   SKIFF_CLUSTER_CACHE     build cache                        ($HOME/.cache/skiff-cluster)
#   SKIFF_APISERVER_PORT    kube-apiserver secure port         (6443)
#   SKIFF_ETCD_PORT         etcd client port                   (2379; peer port is +1)
#   SKIFF_KCM_PORT          controller-manager healthz port    (10257)
#   SKIFF_SCHEDULER_PORT    scheduler healthz port             (10259)
#   SKIFF_ADVERTISE_ADDRESS --advertise-address of the apiserver (default: the apiserver picks the
#                           host's default-route address; loopback is not allowed there)
#   SKIFF_NODE_COMMAND      command line of the node (run by bash -c, in its own process group,
#                           log logs/node.log); its environment has KUBECONFIG=admin.kubeconfig,
#                           SKIFF_NODE_KUBECONFIG=node.kubeconfig (system:node:<name>, for the Node
#                           authorizer), SKIFF_NODE_NAME, SKIFF_CLUSTER_DIR and the kubelet API's
#                           SKIFF_KUBELET_TLS_CERT/_KEY (pki/kubelet.crt, .key), SKIFF_KUBELET_CLIENT_CA
#                           (pki/ca.crt) and SKIFF_KUBELET_PORT
#   SKIFF_NODE_NAME         node name exported to the node, also in node.crt (skiff-node)
#   SKIFF_NODE_IP           node InternalIP: the IP SAN of pki/kubelet.crt, which the apiserver checks
#                           when it calls the node (10.244.0.1 by default); exported to the node only
#                           when set
#   SKIFF_KUBELET_PORT      the kubelet API port (10250), checked to be free with a node
#   SKIFF_NODE_TIMEOUT      seconds to wait for a Ready node   (120)
#   SKIFF_READY_TIMEOUT     seconds to wait for each component (120)
#   SKIFF_APISERVER_ARGS    extra kube-apiserver flags (word-split)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${SKIFF_CLUSTER_DIR:-/tmp/skiff-cluster}"
api_port="${SKIFF_APISERVER_PORT:-6443}"
etcd_port="${SKIFF_ETCD_PORT:-2379}"
etcd_peer_port="$((etcd_port + 1))"
kcm_port="${SKIFF_KCM_PORT:-10257}"
sched_port="${SKIFF_SCHEDULER_PORT:-10259}"
node_name="${SKIFF_NODE_NAME:-skiff-node}"
node_ip="${SKIFF_NODE_IP:-10.244.0.1}"
kubelet_port="${SKIFF_KUBELET_PORT:-10250}"
node_timeout="${SKIFF_NODE_TIMEOUT:-120}"
ready_timeout="${SKIFF_READY_TIMEOUT:-120}"
service_cidr="10.96.0.0/16"
service_ip="10.96.0.1"
server="https://127.0.0.1:$api_port"

now_ms() { local t="${EPOCHREALTIME/./}"; echo "${t:0:-3}"; }
fmt_s() { printf '%d.%d' "$(($1 / 1000))" "$((($1 % 1000) / 100))"; }
t0="$(now_ms)"
t_step="$t0"
log() { printf '[up %6ss] %s\n' "$(fmt_s $(($(now_ms) - t0)))" "$*"; }
step_done() { # description: prints the step's own duration and the running total
  local now; now="$(now_ms)"
  printf '[up %6ss] %-48s %6ss\n' "$(fmt_s $((now - t0)))" "$1" "$(fmt_s $((now - t_step)))"
  t_step="$now"
}
error=""
die() { error="$*"; echo "up.sh: error: $*" >&2; exit 1; }

command -v kubectl >/dev/null || die "kubectl not found on PATH"

started=0
on_exit() {
  local rc=$?
  if [[ $rc -ne 0 && $started -eq 1 ]]; then
    echo "up.sh: failed (exit $rc); last log lines:" >&2
    for f in "$dir"/logs/*.log; do
      [[ -f "$f" ]] || continue
      echo "----- $f" >&2
      tail -n 10 "$f" >&2
    done
    echo "up.sh: stopping what was started (state kept in $dir)" >&2
    KEEP_STATE=1 SKIFF_CLUSTER_DIR="$dir" "$here/down.sh" >&2 || true
    [[ -z "$error" ]] || echo "up.sh: FAILED: $error" >&2
  fi
}
trap on_exit EXIT

# --- refuse to start twice / on busy ports --------------------------------------------------
if compgen -G "$dir/pids/*.pid" >/dev/null; then
  for f in "$dir"/pids/*.pid; do
    pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null; then
      die "$(basename "$f" .pid) is already running (pid $pid) from $dir; run down.sh first"
    fi
  done
fi
ports=("$etcd_port" "$etcd_peer_port" "$api_port" "$kcm_port" "$sched_port")
[[ -n "${SKIFF_NODE_COMMAND:-}" ]] && ports+=("$kubelet_port")
for p in "${ports[@]}"; do
  if ss -Hltn "sport = :$p" | grep -q .; then
    die "port $p is already in use (set SKIFF_*_PORT or stop the other cluster)"
  fi
done

# --- build (cached) ---------------------------------------------------------------------------
bin="$("$here/build.sh")"
step_done "build (cached: ${bin##*/})"

# --- state dir, pki, kubeconfigs, token file --------------------------------------------------
mkdir -p "$dir"/{pki,etcd,logs,pids}
chmod 700 "$dir" "$dir/etcd"
pki="$dir/pki"
"$bin/pki" --dir "$pki" --service-ip "$service_ip" --node-name "$node_name" --node-ip "$node_ip" >/dev/null

b64() { base64 -w0 <"$1"; }
write_kubeconfig() { # file user [cert-base | token:<t>]
  local file="$1" user="$2" cred="$3" auth
  if [[ "$cred" == token:* ]]; then
    auth="    token: ${cred#token:}"
  else
    auth="    client-certificate-data: $(b64 "$pki/$cred.crt")
    client-key-data: $(b64 "$pki/$cred.key")"
  fi
  umask 077
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster:
    server: $server
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: $user
  user:
$auth
contexts:
- name: $user@skiff
  context:
    cluster: skiff
    user: $user
    namespace: default
current-context: $user@skiff
EOF
}

if [[ ! -f "$dir/tokens.csv" ]]; then
  token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  (umask 077; echo "$token,skiff-user,skiff-user-uid" >"$dir/tokens.csv")
fi
user_token="$(cut -d, -f1 "$dir/tokens.csv")"
write_kubeconfig "$dir/admin.kubeconfig" kubernetes-admin admin
write_kubeconfig "$dir/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
write_kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler scheduler
write_kubeconfig "$dir/node.kubeconfig" "system:node:$node_name" node
write_kubeconfig "$dir/user.kubeconfig" skiff-user "token:$user_token"
step_done "pki + kubeconfigs"

# --- process helpers --------------------------------------------------------------------------
# Each component runs in its own session (setsid), so its pid is also its process-group id and
# down.sh can stop it and anything it spawned. SKIFF_CLUSTER_DIR in its environment lets down.sh
# make sure a pid file still names our process.
export SKIFF_CLUSTER_DIR="$dir"
start() { # name cmd...
  local name="$1"; shift
  started=1
  setsid "$@" </dev/null >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name.pid"
  echo "$name" >>"$dir/pids/order"
}
alive() { kill -0 "$(cat "$dir/pids/$1.pid")" 2>/dev/null; }
wait_for() { # name timeout description check-cmd...
  local name="$1" timeout="$2" what="$3"; shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    alive "$name" || die "$name exited while waiting for $what (see $dir/logs/$name.log)"
    ((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for $what (see $dir/logs/$name.log)"
    sleep 0.2
  done
}
: >"$dir/pids/order"

# --- etcd -------------------------------------------------------------------------------------
start etcd "$bin/etcd" --data-dir "$dir/etcd" \
  --listen-client-url "http://127.0.0.1:$etcd_port" --listen-peer-url "http://127.0.0.1:$etcd_peer_port"
wait_for etcd "$ready_timeout" "etcd health" \
  sh -c "curl -fsS http://127.0.0.1:$etcd_port/health | grep -q '\"health\":\"true\"'"
step_done "etcd ready (:$etcd_port)"

# --- kube-apiserver ---------------------------------------------------------------------------
# shellcheck disable=SC2054 # commas inside flag values
apiserver_args=(
  --etcd-servers="http://127.0.0.1:$etcd_port"
  --bind-address=127.0.0.1
  --secure-port="$api_port"
  --tls-cert-file="$pki/apiserver.crt"
  --tls-private-key-file="$pki/apiserver.key"
  --client-ca-file="$pki/ca.crt"
  --authorization-mode=Node,RBAC
  --token-auth-file="$dir/tokens.csv"
  --allow-privileged=true
  --service-cluster-ip-range="$service_cidr"
  --service-account-issuer=https://kubernetes.default.svc.cluster.local
  --service-account-key-file="$pki/sa.pub"
  --service-account-signing-key-file="$pki/sa.key"
  --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
  --kubelet-client-key="$pki/apiserver-kubelet-client.key"
  --kubelet-certificate-authority="$pki/ca.crt"
  --kubelet-preferred-address-types=InternalIP,Hostname
  --requestheader-client-ca-file="$pki/front-proxy-ca.crt"
  --requestheader-allowed-names=front-proxy-client
  --requestheader-username-headers=X-Remote-User
  --requestheader-group-headers=X-Remote-Group
  --requestheader-extra-headers-prefix=X-Remote-Extra-
  --proxy-client-cert-file="$pki/front-proxy-client.crt"
  --proxy-client-key-file="$pki/front-proxy-client.key"
  --enable-aggregator-routing=true
  --profiling=false
)
[[ -n "${SKIFF_ADVERTISE_ADDRESS:-}" ]] && apiserver_args+=(--advertise-address="$SKIFF_ADVERTISE_ADDRESS")
# shellcheck disable=SC2206
[[ -n "${SKIFF_APISERVER_ARGS:-}" ]] && apiserver_args+=($SKIFF_APISERVER_ARGS)
start kube-apiserver "$bin/kube-apiserver" "${apiserver_args[@]}"
admin=(kubectl --kubeconfig "$dir/admin.kubeconfig" --request-timeout=5s)
wait_for kube-apiserver "$ready_timeout" "kube-apiserver /readyz" \
  sh -c "kubectl --kubeconfig '$dir/admin.kubeconfig' --request-timeout=5s get --raw /readyz | grep -qx ok"
step_done "kube-apiserver ready (:$api_port)"
# The apiserver's kubelet client (not in system:masters) may call the kubelet API, as kubeadm sets it.
"${admin[@]}" create clusterrolebinding skiff:apiserver-kubelet-api-admin --clusterrole=system:kubelet-api-admin \
  --user=kube-apiserver-kubelet-client --dry-run=client -o yaml | "${admin[@]}" apply -f - >/dev/null

# --- kube-controller-manager and kube-scheduler -----------------------------------------------
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig="$dir/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
  --authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
  --client-ca-file="$pki/ca.crt" \
  --requestheader-client-ca-file="$pki/front-proxy-ca.crt" \
  --bind-address=127.0.0.1 --secure-port="$kcm_port" \
  --leader-elect=false \
  --use-service-account-credentials=true \
  --service-account-private-key-file="$pki/sa.key" \
  --root-ca-file="$pki/ca.crt" \
  --cluster-signing-cert-file="$pki/ca.crt" \
  --cluster-signing-key-file="$pki/ca.key" \
  --service-cluster-ip-range="$service_cidr" \
  --cluster-name=skiff \
  --controllers='*' \
  --profiling=false
start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig="$dir/scheduler.kubeconfig" \
  --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
  --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
  --client-ca-file="$pki/ca.crt" \
  --bind-address=127.0.0.1 --secure-port="$sched_port" \
  --leader-elect=false \
  --profiling=false
wait_for kube-controller-manager "$ready_timeout" "kube-controller-manager /healthz" \
  sh -c "curl -fsSk https://127.0.0.1:$kcm_port/healthz | grep -qx ok"
wait_for kube-scheduler "$ready_timeout" "kube-scheduler /healthz" \
  sh -c "curl -fsSk https://127.0.0.1:$sched_port/healthz | grep -qx ok"
step_done "controller-manager + scheduler healthy"
wait_for kube-controller-manager "$ready_timeout" "the default ServiceAccount in namespace default" \
  "${admin[@]}" -n default get serviceaccount default
step_done "default ServiceAccount exists"

# --- optional node -------------------------------------------------------------------------------
if [[ -n "${SKIFF_NODE_COMMAND:-}" ]]; then
  [[ -n "${SKIFF_NODE_IP:-}" ]] && export SKIFF_NODE_IP
  KUBECONFIG="$dir/admin.kubeconfig" SKIFF_NODE_KUBECONFIG="$dir/node.kubeconfig" SKIFF_NODE_NAME="$node_name" \
    SKIFF_KUBELET_TLS_CERT="$pki/kubelet.crt" SKIFF_KUBELET_TLS_KEY="$pki/kubelet.key" \
    SKIFF_KUBELET_CLIENT_CA="$pki/ca.crt" SKIFF_KUBELET_PORT="$kubelet_port" \
    start node bash -c "$SKIFF_NODE_COMMAND"
  node_ready() {
    "${admin[@]}" get nodes \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
      | grep -qx True
  }
  wait_for node "$node_timeout" "a Ready node ($SKIFF_NODE_COMMAND)" node_ready
  step_done "node Ready ($("${admin[@]}" get nodes -o name | tr '\n' ' '))"
else
  log "SKIFF_NODE_COMMAND not set: no node (pods will stay Pending)"
fi

version="$("${admin[@]}" version -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | tail -1)"
log "cluster up: Kubernetes ${version:-?} at $server"
log "  admin: export KUBECONFIG=$dir/admin.kubeconfig"
log "  user:  $dir/user.kubeconfig (skiff-user, RBAC only)"
log "  logs:  $dir/logs/   stop: $here/down.sh"
