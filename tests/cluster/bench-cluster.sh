#!/usr/bin/env bash
# Benchmark: Skiff on a local Kubernetes cluster (scripts/local-cluster.sh up: the control plane and
# the real node of tests/cluster/node.sh, the kubelet v1.35 with containerd and runc, kube-proxy,
# CoreDNS; Skiff's images built from deploy/docker with the release binaries) side by side with
# standalone mode (`skiff up`), in one run on the same machine, for docs/benchmarks.md.
#
#   cargo build --release --bins && flock /tmp/skiff-cluster.lock tests/cluster/bench-cluster.sh
#
# Both run the same three InferenceServices on examples/models/iris with the same autoscaler
# settings (stable-window 6s, scale-to-zero-grace-period 2s, allow-zero-initial-scale, initial-scale
# 0; in the cluster set live in inferenceservice-config, for skiff up in its --config file):
#   default/iris     minReplicas 1, maxReplicas 1             the warm path
#   bench-cold/iris  minReplicas 0                            cold starts
#   bench-step/iris  minReplicas 0, maxReplicas 10, cc 4      the 0 -> 200 step
# and measures (tests/cluster/bench_cluster.py):
#   1. cold starts, N of each alternating cluster / standalone, each from 0 replicas and 0 pods: one
#      V2 infer through the router (Host iris.bench-cold.example.com) timed to the first byte, and
#      where the time went, in ms on this machine's one clock, each step from its own source:
#      autoscaler "scaled" (controller pod's log) -> pod created, pod bound to the node (the helper's
#      watch of the API server) -> the kubelet has the pod (kubelet.log: the first line naming it)
#      -> RunPodSandbox called / returns, CreateContainer / StartContainer kserve-container returns
#      (containerd.log) -> skiff-server "listening" / "ready: every model is loaded" (the model
#      container's log) -> "a starting pod answered its readiness path" (activator pod's log, at debug
#      for skiff_dataplane::probe only) or the EndpointSlice's ready endpoint (watch) -> first byte;
#      and, off the request's path, the pod's Ready condition and the EndpointSlice's ready endpoint
#      as the watch saw them (the kubelet's readiness probe, every 1 s) and the kubelet's own
#      "Observed pod startup duration";
#   2. the warm path with skiff-loadgen at 1 and 16 connections, alternated, 3 runs each: through the
#      router's Service (ClusterIP:80, kube-proxy's rules spread connections over the two router
#      pods) and straight to the model pod (pod IP:8080), through skiff up's router and straight to
#      its replica. skiff-loadgen sends Host = the address it connects to, so the routers resolve
#      /v2/models/iris/infer by model name (namespace default), not by the Host route;
#   3. a 0 -> 200 concurrency step (skiff-loadgen, 200 keep-alive connections for 10 s, through the
#      router (cluster: its Service) with the /serving/bench-step/iris/ path): replicas the
#      autoscaler asks for, time until they are ready (cluster: ready endpoints in the revision's
#      EndpointSlices, from a watch; standalone: skiff up's status every 50 ms), failures, p50/p99.
#      skiff up is stopped before the cluster's step, so the two steps do not share the cores.
# Then a summary table. Everything is torn down on every exit (local-cluster.sh down; skiff up
# SIGTERMed). Needs root (the real node: containerd, iptables), the real node's tools
# (scripts/setup.sh: buildah, containerd, runc, mmdebstrap, iptables), release binaries (skiff,
# skiff-server, skiff-loadgen, skiff-controller, skiff-router, skiff-activator, skiff-web), kubectl,
# python3, ONNX Runtime (.ort/env), and the machine to itself: it refuses to start while a
# kube-apiserver runs (take /tmp/skiff-cluster.lock, as the cluster tests do: one real node at a
# time on a machine).
#
# Environment: SKIFF_BENCH_COLD_STARTS (5), SKIFF_BENCH_WARM_SECONDS (3), SKIFF_BENCH_WARM_RUNS (3),
# SKIFF_BENCH_STEP (200), SKIFF_BENCH_STEP_SECONDS (10), SKIFF_BENCH_KEEP=1 (keep the work dir and
# the cluster state dir), the local-cluster variables (SKIFF_CLUSTER_DIR /tmp/skiff-bench-cluster,
# ports 6943/2879/10757/10759).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-bench-cluster}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-6943}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2879}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10757}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10759}"
export SKIFF_LOCAL_PROFILE=release
export SKIFF_STOP_GRACE="${SKIFF_STOP_GRACE:-10}"
dir="$SKIFF_CLUSTER_DIR"
cold_starts="${SKIFF_BENCH_COLD_STARTS:-5}"
warm_seconds="${SKIFF_BENCH_WARM_SECONDS:-3}"
warm_runs="${SKIFF_BENCH_WARM_RUNS:-3}"
step="${SKIFF_BENCH_STEP:-200}"
step_seconds="${SKIFF_BENCH_STEP_SECONDS:-10}"
bin="$root/target/release"
helper="$root/tests/cluster/bench_cluster.py"
t0=$SECONDS

log() { printf '[bench-cluster %4ss] %s\n' "$((SECONDS - t0))" "$*" >&2; }
die() {
  log "FAIL $*"
  exit 1
}

# --- preconditions ---------------------------------------------------------------------------------
[[ "$(id -u)" == 0 ]] || die "the real node needs root (containerd, iptables)"
for tool in kubectl python3 ip curl setsid; do
  command -v "$tool" >/dev/null || die "$tool not found on PATH"
done
for b in skiff skiff-server skiff-loadgen skiff-controller skiff-router skiff-activator skiff-web; do
  [[ -x "$bin/$b" ]] || die "target/release/$b is missing: cargo build --release --bins"
done
if [[ -z "${ORT_DYLIB_PATH:-}" && -f "$root/.ort/env" ]]; then
  # shellcheck source=/dev/null
  source "$root/.ort/env"
fi
[[ -f "${ORT_DYLIB_PATH:-}" ]] || die "ORT_DYLIB_PATH is not set to ONNX Runtime's library (scripts/setup.sh)"
export ORT_DYLIB_PATH
if pgrep -f kube-apiserver >/dev/null; then
  pgrep -af kube-apiserver | cut -c1-160 >&2
  die "a kube-apiserver is already running (another cluster, or an e2e test): the figures need the machine to themselves"
fi
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
log "load average before: $load_before ($(nproc) CPUs)"

work="$(mktemp -d /tmp/skiff-bench-cluster.XXXXXX)"
models="$work/standalone"
mkdir -p "$models" "$work/results"
sa_pid=""
cluster_started=0
ok=0

stop_standalone() {
  [[ -n "$sa_pid" ]] || return 0
  if kill -0 "$sa_pid" 2>/dev/null; then
    kill -TERM "$sa_pid" 2>/dev/null || true
    for _ in $(seq 1 200); do
      kill -0 "$sa_pid" 2>/dev/null || break
      sleep 0.2
    done
    # Still there after 40 s: its whole process group (skiff up ran under setsid: it and its replicas).
    kill -0 "$sa_pid" 2>/dev/null && kill -KILL -- "-$sa_pid" 2>/dev/null
  fi
  wait "$sa_pid" 2>/dev/null || true
  sa_pid=""
}
cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  stop_standalone
  if ((cluster_started)); then
    # The pods' logs live in the node's state, which node.sh clean removes: keep Skiff's.
    if [[ -d "$dir/node/pod-logs" ]]; then
      mkdir -p "$work/pod-logs"
      cp -r "$dir"/node/pod-logs/skiff-system_* "$work/pod-logs/" 2>/dev/null
    fi
    if ((ok)) && [[ "${SKIFF_BENCH_KEEP:-0}" != 1 ]]; then
      "$root/scripts/local-cluster.sh" down >"$work/local-cluster-down.log" 2>&1 || {
        cat "$work/local-cluster-down.log" >&2
        rc=1
      }
    else
      KEEP_STATE=1 "$root/scripts/local-cluster.sh" down >"$work/local-cluster-down.log" 2>&1 || {
        cat "$work/local-cluster-down.log" >&2
        rc=1
      }
      log "cluster state and logs kept in $dir"
    fi
  fi
  if ((ok)) && [[ "${SKIFF_BENCH_KEEP:-0}" != 1 ]]; then
    rm -rf "$work"
  else
    log "work dir kept: $work (skiff-up.log, results/)"
  fi
  log "done in $((SECONDS - t0)) s (exit $rc)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the InferenceServices and the settings ---------------------------------------------------------
isvc() { # namespace predictor-lines
  cat <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris
  namespace: $1
spec:
  predictor:
$2
    model:
      modelFormat: {name: onnx}
      storageUri: file://$root/examples/models/iris
EOF
}
isvc default "    minReplicas: 1
    maxReplicas: 1" >"$models/warm.yaml"
isvc bench-cold "    minReplicas: 0" >"$models/cold.yaml"
isvc bench-step "    minReplicas: 0
    maxReplicas: 10
    containerConcurrency: 4" >"$models/step.yaml"
autoscaler_json='{"stable-window":"6s","scale-to-zero-grace-period":"2s","allow-zero-initial-scale":"true","initial-scale":"0"}'
cat >"$work/skiff-up.yaml" <<'EOF'
domain: example.com
autoscaler:
  stable-window: 6s
  scale-to-zero-grace-period: 2s
  allow-zero-initial-scale: "true"
  initial-scale: "0"
activator:
  maxPending: 1000
EOF

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sa_port="$(free_port)"
sa_admin="$(free_port)"

# --- standalone: skiff up (in the background while the cluster starts) ------------------------------
# RUST_LOG: skiff up's backend relays each replica's log lines at debug (for the cold-start
# breakdown; a few lines per replica start, nothing per request). NO_COLOR: plain log lines.
log "target/release/skiff up on $models (router 127.0.0.1:$sa_port, admin $sa_admin)"
RUST_LOG="info,skiff::standalone::backend=debug" NO_COLOR=1 setsid "$bin/skiff" up "$models" \
  --http-port "$sa_port" --admin-port "$sa_admin" --config "$work/skiff-up.yaml" >"$work/skiff-up.log" 2>&1 &
sa_pid=$!

# --- cluster ---------------------------------------------------------------------------------------
log "scripts/local-cluster.sh up (the real node, images from the release binaries; state $dir)"
cluster_started=1
if ! "$root/scripts/local-cluster.sh" up >"$work/local-cluster-up.log" 2>&1; then
  tail -n 40 "$work/local-cluster-up.log" >&2
  die "local-cluster.sh up failed"
fi
grep -E '^\[local-cluster' "$work/local-cluster-up.log" | sed 's/^/    /' >&2
kill -0 "$sa_pid" 2>/dev/null || {
  tail -n 30 "$work/skiff-up.log" >&2
  die "skiff up exited"
}
export KUBECONFIG="$dir/admin.kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

# The admin client certificate, for the helper's API calls (watches).
k config view --raw -o json >"$work/kubeconfig.json"
python3 - "$work" <<'PY'
import base64, json, os, sys
work = sys.argv[1]
cfg = json.load(open(os.path.join(work, "kubeconfig.json")))
cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
for name, data in (("kube-ca.crt", cluster["certificate-authority-data"]),
                   ("kube-client.crt", user["client-certificate-data"]),
                   ("kube-client.key", user["client-key-data"])):
    with open(os.path.join(work, name), "wb") as f:
        f.write(base64.b64decode(data))
    os.chmod(os.path.join(work, name), 0o600)
PY

# Short autoscaler windows, read live by the autoscaler; initial scale 0 for new revisions.
k -n skiff-system patch configmap inferenceservice-config --type merge \
  -p "$(python3 -c 'import json,sys; print(json.dumps({"data": {"autoscaler": sys.argv[1]}}))' "$autoscaler_json")" >/dev/null
log "inferenceservice-config autoscaler = $autoscaler_json"
# The activator logs when its own probe finds a starting pod ready (debug, that module only).
activator_log="info,skiff_dataplane::probe=debug"
k -n skiff-system set env deployment/skiff-activator RUST_LOG="$activator_log" >/dev/null
k -n skiff-system rollout status deployment/skiff-activator --timeout=120s >/dev/null ||
  die "the activator rollout (RUST_LOG) did not finish"
activators_settled() {
  [[ "$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-activator --no-headers 2>/dev/null | wc -l)" == 2 ]]
}
for _ in $(seq 1 240); do
  activators_settled && break
  sleep 0.5
done
activators_settled || die "the old activator pods did not go away"
log "activator pods restarted with RUST_LOG=$activator_log"
# As e2e-serverless.sh: give the autoscaler's ConfigMap watch a moment before the first revision.
sleep 2

# The router as a client on this machine reaches it: its Service's ClusterIP:80 (kube-proxy's rules),
# as local-cluster.sh writes it to $dir/env.
router="$(k -n skiff-system get svc skiff-router -o jsonpath='{.spec.clusterIP}')"
[[ -n "$router" ]] || die "the skiff-router Service has no ClusterIP"
router="$router:80"

k create namespace bench-cold >/dev/null
k create namespace bench-step >/dev/null
for f in warm cold step; do
  k apply -f "$models/$f.yaml" >/dev/null
done
for ns in default bench-cold bench-step; do
  k -n "$ns" wait --for=condition=Ready isvc/iris --timeout=120s >/dev/null ||
    die "isvc $ns/iris is not Ready"
done
log "cluster: router Service $router; InferenceServices Ready (default/iris warm, bench-cold/iris, bench-step/iris)"

python3 - "$work/env.json" <<PY
import json, sys
json.dump({
    "work": "$work", "cluster_dir": "$dir", "kubeconfig_json": "$work/kubeconfig.json",
    "router": "$router", "sa_router": "127.0.0.1:$sa_port", "sa_admin": "127.0.0.1:$sa_admin",
    "sa_log": "$work/skiff-up.log", "loadgen": "$bin/skiff-loadgen", "load_before": "$load_before",
}, open(sys.argv[1], "w"), indent=1)
PY
env_json="$work/env.json"
run_helper() { timeout 600 python3 "$helper" "$@" --env "$env_json"; }

run_helper wait-ready || die "the services did not settle"
log "both modes ready: warm replica up, cold and step revisions at zero"

# --- measurements ------------------------------------------------------------------------------------
log "1. cold starts: $cold_starts per mode, alternating cluster / standalone"
run_helper cold -n "$cold_starts" >"$work/cold.txt" || die "cold starts failed"
log "2. warm path: skiff-loadgen ${warm_seconds}s x $warm_runs runs at 1 and 16 connections"
run_helper warm --seconds "$warm_seconds" --runs "$warm_runs" >"$work/warm.txt" || die "warm path failed"
log "3a. 0 -> $step step, standalone"
run_helper step --mode standalone --concurrency "$step" --seconds "$step_seconds" || die "standalone step failed"
log "stopping skiff up (so that the cluster's step has the cores)"
stop_standalone
log "3b. 0 -> $step step, cluster"
run_helper step --mode cluster --concurrency "$step" --seconds "$step_seconds" || die "cluster step failed"

run_helper report
ok=1
