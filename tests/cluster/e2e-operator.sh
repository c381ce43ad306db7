#!/usr/bin/env bash
# End-to-end test of skiff-controller against the real local control plane (tests/cluster) with
# the real node (tests/cluster/node.sh: kubelet, containerd, CoreDNS) running the model pods from
# Skiff's server image.
#
#   tests/cluster/e2e-operator.sh       # build, local-cluster.sh node, checks, figures, down
#
# 1. cargo build --workspace (debug); Skiff's images are built from deploy/docker/ with those
#    binaries (tests/cluster/images.sh) and the revisions' server image is localhost/skiff-server.
# 2. scripts/local-cluster.sh node: the control plane and the real node, nothing of Skiff applied.
# 3. The KServe sample-manifest corpus (tests/fixtures/kserve-corpus/admission.py): every manifest
#    through kubectl apply --dry-run=server with KServe's own CRD installed, then with Skiff's; every
#    manifest KServe's CRD admits must be admitted by Skiff's, and both outcomes must be those
#    admission.tsv records. Then kubectl applies the CRD, the namespace, the RBAC and the
#    inferenceservice-config from deploy/.
# 4. skiff-controller runs on the host with the admin kubeconfig and takes the leader Lease; a second
#    one runs with a token of the skiff-controller ServiceAccount (kubectl create token) and waits;
#    the first is stopped, the second takes over and does the rest: the RBAC in deploy/ is enough,
#    two replicas are safe, and the bookkeeping survives a controller change.
# 5. iris (storageUri file://<repo>/examples/models/iris, a hostPath) becomes Ready with a URL; its pod
#    runs skiff-server and a V2 infer to podIP:8080 answers label 1 for [6.8,2.8,4.8,1.4]; a new
#    storageUri rolls revision 2 (revision 1 kept at zero: routing-state reserve, 0 replicas, as
#    api/src/revision.rs keeps two revisions without traffic); canaryTrafficPercent 30 with a new
#    storageUri gives 70/30 (prev/latest), promotion gives 100; bad specs are refused by the API
#    server naming the field (a 60-character name naming metadata.name and its limit of 47,
#    `timeout: 0`, bounds); unknown fields (`spec.predictor.minReplica`) refused by kubectl apply and
#    a warning with --validate=warn, as with KServe's CRD; what KServe's CRD admits but Skiff cannot run (an ONNX model without
#    storageUri, multi-node beside model, explainer.art) is admitted and refused in the status naming the field;
#    `kubectl get isvc` shows the columns; an idle controller leaves every
#    resourceVersion alone for 10 s; `kubectl delete isvc` removes every child; an empty model.onnx
#    gives the pod's lastState.terminated.message and PredictorReady False (ModelLoadFailed) the
#    server's reason (the kubelet's termination message and the controller); with
#    inferenceservice-config skiff.allowHostPath false, a file:// InferenceService gets no revision
#    and its status says why (InvalidSpec, naming spec.predictor.model.storageUri and the setting).
# 6. Figures: time to Ready for one InferenceService and for $SKIFF_E2E_BULK (200) created at once
#    without pods, then $SKIFF_E2E_BULK_PODS (100: the kubelet's default maxPods is 110) with a pod
#    each, the controller's CPU time (/proc/<pid>/stat) and peak RSS (VmHWM).
# Exit status 0 only if every check passed; down.sh runs on every exit (state kept on failure).
#
# Environment: SKIFF_E2E_NO_BUILD=1 skips cargo build; SKIFF_E2E_TIMEOUT (seconds per wait, 120);
# SKIFF_E2E_BULK (200; 0 skips: the round with initial scale 0, control plane only);
# SKIFF_E2E_BULK_PODS (100; 0 skips the round with a pod each); SKIFF_E2E_CORPUS (1; 0 skips the
# corpus); SKIFF_E2E_NODE (1; 0 runs without a node: no pods, the pod checks are skipped and say so);
# the tests/cluster variables (SKIFF_CLUSTER_DIR defaults to /tmp/skiff-e2e-operator, ports to
# 6643/2579/10457/10459).
set -euo pipefail

e2e_name=e2e-operator
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-operator}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-6643}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2579}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10457}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10459}"
export SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
bulk="${SKIFF_E2E_BULK:-200}"
bulk_pods="${SKIFF_E2E_BULK_PODS:-100}"
use_node="${SKIFF_E2E_NODE:-1}"
corpus="${SKIFF_E2E_CORPUS:-1}"
admin_port_a=18181
admin_port_b=18182
ns=e2e

skip() { log "SKIP $*"; skipped+=("$*"); }
skipped=()

# --- build -------------------------------------------------------------------------------------
e2e_build
for bin in skiff-controller skiff-server; do
  [[ -x "$root/target/debug/$bin" ]] || fail "no $root/target/debug/$bin (build the workspace)"
done
if [[ -z "${ORT_DYLIB_PATH:-}" && -f "$root/.ort/env" ]]; then
  # shellcheck source=/dev/null
  source "$root/.ort/env"
fi
pods=0
if [[ "$use_node" == 1 ]]; then
  [[ "$(id -u)" == 0 ]] || fail "the real node needs root (SKIFF_E2E_NODE=0 runs without pods)"
  pods=1
fi
server_image="localhost/skiff-server:$SKIFF_LOCAL_TAG"

work="$(mktemp -d /tmp/skiff-e2e-operator.XXXXXX)"
# The model pods run as uid 65532 and read the copies of the model made here through a hostPath.
chmod 755 "$work"
cluster_started=0
passed=0
controller_pids=()
cleanup() {
  local rc=$?
  set +e
  for pid in "${controller_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  if ((cluster_started)); then
    if ((passed)); then
      stop_cluster >/dev/null || rc=1
    else
      for f in "$dir"/logs/controller-*.log; do
        [[ -f "$f" ]] || continue
        echo "---- $f (tail) ----"
        tail -n 25 "$f"
      done
      ((pods)) && e2e_log_tails "$ns"
      KEEP_STATE=1 stop_cluster || true
      echo "state and logs kept in $dir"
    fi
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- cluster -----------------------------------------------------------------------------------
stop_cluster() {
  if ((pods)); then
    "$root/scripts/local-cluster.sh" down
  else
    "$root/tests/cluster/down.sh"
  fi
}
log "starting the cluster ($([[ $pods == 1 ]] && echo "with the real node" || echo "without a node"))"
cluster_started=1
if ((pods)); then
  "$root/scripts/local-cluster.sh" node 2>&1 | sed 's/^/    /'
else
  # A state dir kept by a failed run would make up.sh a restart: start from nothing.
  [[ -d "$dir" ]] && KEEP_STATE=0 "$root/tests/cluster/down.sh" >/dev/null
  unset SKIFF_NODE_COMMAND
  "$root/tests/cluster/up.sh" | sed 's/^/    /'
fi
export KUBECONFIG="$dir/admin.kubeconfig"

# --- KServe's sample manifests through admission: KServe's CRD, then Skiff's (before any object) ---
if [[ "$corpus" == 1 ]]; then
  log "the KServe corpus: kubectl apply --dry-run=server with KServe's CRD, then with Skiff's"
  python3 "$root/tests/fixtures/kserve-corpus/admission.py" "$root/deploy/crds/serving.kserve.io_inferenceservices.yaml" \
    >"$work/admission.log" 2>&1 || { sed 's/^/    /' "$work/admission.log"; fail "the KServe corpus through admission"; }
  grep -v '^  ' "$work/admission.log" | sed 's/^/    /'
  pass "every KServe sample manifest KServe's CRD admits is admitted by Skiff's; outcomes as admission.tsv records"
else
  skip "the KServe corpus through admission (SKIFF_E2E_CORPUS=0)"
fi

# --- CRD, RBAC, config from deploy/ ---------------------------------------------------------------
k apply --server-side -f "$root/deploy/crds/serving.kserve.io_inferenceservices.yaml" >/dev/null
k wait --for=condition=Established crd/inferenceservices.serving.kserve.io --timeout=60s >/dev/null
for f in namespace config rbac-controller rbac-router rbac-activator; do
  k apply -f "$root/deploy/base/$f.yaml" >/dev/null
done
# The server image built from deploy/docker/, and zero initial scale allowed (for the bulk round
# without pods).
skiff_config() { # allowHostPath
  local skiff="{\"serverImage\": \"$server_image\", \"allowHostPath\": $1}"
  k -n skiff-system patch configmap inferenceservice-config --type merge \
    -p "$(python3 -c 'import json,sys; print(json.dumps({"data": {"skiff": sys.argv[1], "autoscaler": "{\"allow-zero-initial-scale\": \"true\"}"}}))' "$skiff")" >/dev/null
}
skiff_config true
pass "CRD established; namespace, RBAC and inferenceservice-config applied from deploy/"

# --- controllers ----------------------------------------------------------------------------------
controller_args=(--namespace skiff-system --lease-duration-secs 15 --lease-renew-secs 2 --revision-retention-secs 2)
started_pid=""
start_controller() { # name kubeconfig admin-port; sets started_pid
  KUBECONFIG="$2" RUST_LOG=info,kube=warn "$root/target/debug/skiff-controller" "${controller_args[@]}" \
    --admin-addr "127.0.0.1:$3" >"$dir/logs/controller-$1.log" 2>&1 &
  started_pid=$!
  controller_pids+=("$started_pid")
}
metric() { # port name -> value (0 when absent)
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'
}
leader_is() { [[ "$(metric "$1" skiff_controller_leader)" == 1 ]]; }

start_controller admin "$dir/admin.kubeconfig" "$admin_port_a"
pid_a="$started_pid"
wait_until "the admin-kubeconfig controller to lead" leader_is "$admin_port_a"
pass "controller A (admin kubeconfig, pid $pid_a) holds Lease skiff-system/skiff-controller"

token="$(k -n skiff-system create token skiff-controller --duration=2h)"
server="$(k config view --raw -o jsonpath='{.clusters[0].cluster.server}')"
ca="$(k config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
cat >"$work/controller.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: skiff
  cluster: {server: "$server", certificate-authority-data: "$ca"}
users:
- name: skiff-controller
  user: {token: "$token"}
contexts:
- name: skiff-controller
  context: {cluster: skiff, user: skiff-controller}
current-context: skiff-controller
EOF
[[ "$(kubectl --kubeconfig "$work/controller.kubeconfig" auth whoami -o jsonpath='{.status.userInfo.username}')" \
  == system:serviceaccount:skiff-system:skiff-controller ]] || fail "the token is not the ServiceAccount's"
start_controller serviceaccount "$work/controller.kubeconfig" "$admin_port_b"
pid_b="$started_pid"
k create namespace "$ns" >/dev/null

model="$root/examples/models/iris"
# Without a node no pod ever becomes ready: revisions then start at zero replicas (Knative's
# initial-scale 0), which counts as ready, so that rollout, canary and collection are still checked.
iris_scale=""
((pods)) || iris_scale='  annotations: {autoscaling.knative.dev/initial-scale: "0"}'
iris() { # storage-uri [extra predictor lines]
  cat <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris
  namespace: $ns
$iris_scale
spec:
  predictor:
    containerConcurrency: 8
    minReplicas: $((pods))
    model:
      modelFormat: {name: onnx}
      protocolVersion: v2
      storageUri: $1
${2:-}
EOF
}
start_ms="$(now_ms)"
iris "file://$model" | k apply -f - >/dev/null
isvc_get() { k -n "$ns" get isvc iris -o jsonpath="$1"; }
has_deployment() { k -n "$ns" get deployment "$1" >/dev/null; }
wait_until "Deployment iris-predictor-00001" has_deployment iris-predictor-00001
pass "controller A created revision iris-predictor-00001 (Deployment and Service)"
sleep 3
if leader_is "$admin_port_b"; then fail "controller B leads while A holds the Lease"; fi
pass "controller B (ServiceAccount token, pid $pid_b) waits while A leads"
kill -TERM "$pid_a"
wait "$pid_a" || fail "controller A did not exit cleanly on SIGTERM"
controller_pids=("$pid_b")
wait_until "controller B to take the Lease" leader_is "$admin_port_b"
pass "A stopped (released the Lease); B leads with only the RBAC from deploy/base/rbac-controller.yaml"

# --- iris: Ready, URL, pod, inference -------------------------------------------------------------
ready() { [[ "$(isvc_get '{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
traffic() { isvc_get '{range .status.components.predictor.traffic[*]}{.revisionName}={.percent}/{.tag}{" "}{end}'; }
traffic_is() { [[ "$(traffic)" == "$1" ]]; }
infer() { # pod-ip -> label
  curl -fsS -m 5 "http://$1:8080/v2/models/iris/infer" \
    -d '{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}' |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["model_name"], [o for o in r["outputs"] if o["name"]=="label"][0]["data"][0])'
}
revision_pod_ip() { # revision number
  k -n "$ns" get pods -l "serving.kserve.io/inferenceservice=iris,skiff.dev/revision=$1" \
    -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.status.podIP}{"\n"}{end}' | sed -n 1p
}
check_pod_serves() { # revision number
  local ip pod pid answer
  ip="$(revision_pod_ip "$1")"
  [[ -n "$ip" ]] || fail "no running pod for revision $1"
  pod="$(k -n "$ns" get pods -l "skiff.dev/revision=$1,serving.kserve.io/inferenceservice=iris" -o jsonpath='{.items[0].metadata.name}')"
  answer="$(infer "$ip")" || fail "V2 infer to $ip:8080 failed"
  [[ "$answer" == "iris 1" ]] || fail "V2 infer to $ip:8080 answered '$answer', not model iris label 1"
  pid="$(pgrep -f "skiff-server --model-dir /mnt/models --model-name iris" | head -n 1 || true)"
  [[ -n "$pid" ]] || fail "no skiff-server process for iris"
  [[ "$(stat -c %u "/proc/$pid")" == 65532 ]] || fail "iris's skiff-server runs as uid $(stat -c %u "/proc/$pid"), not 65532"
  k -n "$ns" logs "$pod" -c kserve-container | grep -q . || fail "no container log for $pod"
  pass "revision $1: pod $pod ($ip) runs $server_image's skiff-server as uid 65532; V2 infer [6.8,2.8,4.8,1.4] -> label 1"
}

k -n "$ns" wait --for=condition=Ready isvc/iris --timeout="${timeout}s" >/dev/null || fail "iris not Ready"
ready_ms=$(($(now_ms) - start_ms))
url="$(isvc_get '{.status.url}')"
[[ "$url" == "http://iris.$ns.example.com" ]] || fail "status.url is '$url'"
[[ "$(isvc_get '{.status.address.url}')" == "http://iris.$ns.svc.cluster.local" ]] || fail "status.address.url"
traffic_is "iris-predictor-00001=100/latest " || fail "traffic is '$(traffic)'"
pass "iris Ready in $(secs "$ready_ms") s (apply to Ready, through the controller handover), url $url"
if ((pods)); then
  check_pod_serves 1
else
  skip "pods: revisions at zero replicas, no skiff-server process, no V2 infer (no node)"
fi
[[ "$(k -n "$ns" get service iris-predictor-00001 -o jsonpath='{.spec.ports[0].port}->{.spec.ports[0].targetPort}')" == "80->8080" ]] \
  || fail "Service iris-predictor-00001 does not map 80 to 8080"
owner="$(k -n "$ns" get deployment iris-predictor-00001 -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].controller}')"
[[ "$owner" == InferenceService/true ]] || fail "Deployment owner reference is '$owner'"
manager="$(k -n "$ns" get deployment iris-predictor-00001 --show-managed-fields \
  -o jsonpath='{range .metadata.managedFields[?(@.operation=="Apply")]}{.manager}{" "}{end}')"
[[ "$manager" == "skiff-controller " ]] || fail "Apply field managers of the Deployment: '$manager'"
pass "Deployment and Service owned by the InferenceService, applied by field manager skiff-controller only"

# --- revision 2: a new storageUri --------------------------------------------------------------------
cp -r "$model" "$work/iris-copy"
k -n "$ns" patch isvc iris --type merge -p "{\"spec\":{\"predictor\":{\"model\":{\"storageUri\":\"file://$work/iris-copy\"}}}}" >/dev/null
wait_until "Deployment iris-predictor-00002" has_deployment iris-predictor-00002
pass "a new storageUri rolled revision iris-predictor-00002"
wait_until "revision 2 to take all traffic" traffic_is "iris-predictor-00002=100/latest "
routing() { k -n "$ns" get deployment "$1" -o jsonpath='{.metadata.labels.skiff\.dev/routing-state} {.spec.replicas}'; }
reserved() { [[ "$(routing "$1")" == "reserve 0" ]]; }
wait_until "revision 1 kept at zero (reserve)" reserved iris-predictor-00001
[[ "$(isvc_get '{.status.components.predictor.previousRolledoutRevision}/{.status.components.predictor.latestRolledoutRevision}')" \
  == iris-predictor-00001/iris-predictor-00002 ]] || fail "rolled-out revisions in the status"
pass "revision 2 took 100% once ready; revision 1 kept at zero (reserve, 0 replicas); previous/latest rolled out = 00001/00002"
((pods)) && check_pod_serves 2

# --- canary -----------------------------------------------------------------------------------------
# A third model folder: revision 1's own storageUri would route back to revision 1, kept at zero
# (cli/tests/rollback.rs and e2e-serverless part l test that).
cp -r "$model" "$work/iris-canary"
iris "file://$work/iris-canary" "    canaryTrafficPercent: 30" | k apply -f - >/dev/null
wait_until "Deployment iris-predictor-00003" has_deployment iris-predictor-00003
wait_until "the 70/30 canary split" traffic_is "iris-predictor-00003=30/latest iris-predictor-00002=70/prev "
columns="$(k -n "$ns" get isvc iris --no-headers | awk '{print $2, $3, $4, $5}')"
[[ "$columns" == "http://iris.$ns.example.com True 70 30" ]] || fail "kubectl get isvc columns: '$columns'"
k -n "$ns" get isvc iris | sed 's/^/    /'
header="$(k -n "$ns" get isvc iris | sed -n 1p | tr -s ' ')"
[[ "$header" == "NAME URL READY PREV LATEST AGE" ]] || fail "kubectl get isvc header: '$header'"
pass "canaryTrafficPercent 30: revision 3 30% (latest), revision 2 70% (prev); columns URL READY PREV LATEST AGE"
((pods)) && check_pod_serves 3
iris "file://$work/iris-canary" | k apply -f - >/dev/null
wait_until "promotion of revision 3" traffic_is "iris-predictor-00003=100/latest "
wait_until "revision 2 kept at zero (reserve)" reserved iris-predictor-00002
reserved iris-predictor-00001 || fail "revision 1 is not kept at zero any more: $(routing iris-predictor-00001)"
pass "canary removed: revision 3 promoted to 100%; revisions 2 and 1 kept at zero (the bound is two)"

# --- bad specs are refused by the API server, naming the field ---------------------------------------
refused_as() { # name expected-text predictor-lines
  local out
  if out="$(cat <<EOF | k apply -f - 2>&1
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: $1, namespace: $ns}
spec:
  predictor:
$3
EOF
)"; then fail "accepted: $1: $3"; fi
  [[ "$out" == *"$2"* ]] || fail "refusal does not name $2: $out"
  log "     refused: ${out#*: }"
}
refused() { refused_as bad "$@"; }
onnx="    model: {modelFormat: {name: onnx}, storageUri: 'file:///m'}"
refused "spec.predictor.minReplicas" "    minReplicas: 3
    maxReplicas: 1
$onnx"
refused "spec.predictor.canaryTrafficPercent" "    canaryTrafficPercent: 130
$onnx"
refused "spec.predictor.containerConcurrency" "    containerConcurrency: -1
$onnx"
refused "spec.predictor.maxReplicas" "    maxReplicas: -2
$onnx"
refused "exactly one of model, containers or a framework" "    sklearn: {storageUri: 'gs://x'}
$onnx"
refused "spec.predictor.model.modelFormat.name" "    model: {modelFormat: {version: '1'}, storageUri: 'file:///m'}"
refused "spec.predictor.timeout" "    timeout: 0
$onnx"
refused "spec.predictor.containerConcurrency" "    containerConcurrency: 1001
$onnx"
refused_as "$(printf 'a%.0s' {1..60})" "metadata.name is too long; the limit is 47 characters" "$onnx"
refused_as 9lives "metadata.name must be a DNS-1035 label" "$onnx"
pass "bad specs refused by kubectl apply (API server schema bounds and CEL rules), each naming its field"

# --- unknown fields: as with KServe's CRD, refused by kubectl apply (--validate=strict, its default),
# a warning with --validate=warn (the rule skiff up follows too: api/src/fields.rs) ---------------------
refused 'unknown field "spec.predictor.minReplica"' "    minReplica: 0
$onnx"
refused 'unknown field "spec.predictor.model.storageURI"' "    model: {modelFormat: {name: onnx}, storageUri: 'file:///m', storageURI: x}"
refused 'unknown field "spec.transformer.containers[0].imag"' "$onnx
  transformer:
    containers: [{name: t, imag: t}]"
warned="$(cat <<EOF | k apply --dry-run=server --validate=warn -f - 2>&1
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: misspelt, namespace: $ns}
spec:
  predictor:
    minReplica: 0
    serviceAccountName: default
$onnx
EOF
)" || fail "--validate=warn refused an unknown field: $warned"
[[ "$warned" == *'unknown field "spec.predictor.minReplica"'* ]] || fail "no warning naming spec.predictor.minReplica: $warned"
[[ "$warned" != *serviceAccountName* ]] || fail "a field KServe has was warned about: $warned"
log "     warned: $(grep -m1 'unknown field' <<<"$warned")"
pass "unknown fields named by the API server: refused by kubectl apply, a warning with --validate=warn"

# --- what KServe's CRD admits and Skiff cannot run: admitted, refused in the status naming the field ---
# (the CRD admits what KServe's does; validation, the same as skiff up's, says what Skiff lacks)
reason_is() { # name reason
  [[ "$(k -n "$ns" get isvc "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" == "$2" ]]
}
invalid_in_status() { # name expected-text spec-lines
  printf 'apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: %s, namespace: %s}\nspec:\n%s\n' \
    "$1" "$ns" "$3" | k apply -f - >/dev/null || fail "$1 not admitted by the CRD"
  local message
  wait_until "$1 to be refused in its status" reason_is "$1" InvalidSpec
  message="$(k -n "$ns" get isvc "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
  [[ "$message" == *"$2"* ]] || fail "$1: the status does not name $2: $message"
  [[ -z "$(k -n "$ns" get deployments -l serving.kserve.io/inferenceservice="$1" -o name)" ]] \
    || fail "a revision was made for $1"
  log "     $1: ${message}"
  k -n "$ns" delete isvc "$1" --wait=true >/dev/null
}
invalid_in_status nouri "spec.predictor.model.storageUri: is required" "  predictor:
    model: {modelFormat: {name: onnx}}"
invalid_in_status multinode "spec.predictor.containers: Skiff does not have KServe's multi-node serving" "  predictor:
$onnx
    containers: [{name: kserve-container, image: ray, env: [{name: RAY_NODE_COUNT, value: '4'}]}]"
invalid_in_status art "spec.explainer.art: Skiff does not have KServe's ART" "  predictor:
$onnx
  explainer:
    art: {type: SquareAttack}"
pass "admitted by the CRD as by KServe's, refused in the status naming the field: no storageUri for the embedded server, multi-node (RAY_NODE_COUNT), explainer.art"

# --- an idle controller writes nothing ---------------------------------------------------------------
versions() {
  k -n "$ns" get isvc,deployments,services -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}={.metadata.resourceVersion}{" "}{end}'
}
writes() { echo "$(metric "$admin_port_b" skiff_controller_status_writes_total)/$(metric "$admin_port_b" 'skiff_controller_applies_total{kind="Deployment"}')"; }
wait_until "iris Ready" ready
sleep 2
before="$(versions)"
writes_before="$(writes)"
sleep 10
[[ "$(versions)" == "$before" ]] || fail "resourceVersions changed while idle: $before -> $(versions)"
[[ "$(writes)" == "$writes_before" ]] || fail "the controller wrote while idle ($writes_before -> $(writes))"
pass "idle for 10 s: no resourceVersion changed ($(wc -w <<<"$before") objects), no write by the controller"

# --- deletion removes every child -----------------------------------------------------------------------
k -n "$ns" delete isvc iris --wait=true --timeout="${timeout}s" >/dev/null
no_children() {
  [[ -z "$(k -n "$ns" get deployments,replicasets,services,pods -l serving.kserve.io/inferenceservice=iris -o name)" ]]
}
wait_until "every child of iris to go" no_children
if ((pods)); then
  no_iris_server() { ! pgrep -f "skiff-server --model-dir /mnt/models --model-name iris" >/dev/null; }
  wait_until "the iris skiff-server processes to exit" no_iris_server
fi
pass "kubectl delete isvc iris: Deployments, ReplicaSets, Services and pods are gone"

# --- a model that does not load: PredictorReady says why (the server's termination message) ----------
if ((pods)); then
  broken="$(mktemp -d)"
  chmod 755 "$broken"
  : >"$broken/model.onnx"
  iris "file://$broken" | sed 's/name: iris/name: broken/' | k apply -f - >/dev/null
  predictor() { k -n "$ns" get isvc broken -o jsonpath="{.status.conditions[?(@.type==\"PredictorReady\")].$1}"; }
  load_failed() { [[ "$(predictor reason)" == ModelLoadFailed ]]; }
  wait_until "broken to say ModelLoadFailed" load_failed
  message="$(predictor message)"
  [[ "$message" == "cannot load model 'broken' from /mnt/models/model.onnx: not an ONNX model: the file is empty" ]] \
    || fail "PredictorReady's message is not the server's reason: $message"
  terminated="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=broken \
    -o jsonpath='{.items[0].status.containerStatuses[?(@.name=="kserve-container")].lastState.terminated.message}')"
  [[ "$terminated" == "$message" ]] || fail "the pod's lastState.terminated.message: $terminated"
  log "     PredictorReady: ModelLoadFailed: ${message}"
  k -n "$ns" delete isvc broken --wait=true >/dev/null
  rm -rf "$broken"
  pass "an empty model.onnx: the pod's termination message, PredictorReady False (ModelLoadFailed) with it"
fi

# --- the admin switch: allowHostPath false refuses file:// storage, in the status ----------------------
skiff_config false
iris "file://$model" | sed 's/name: iris/name: hostpath/' | k apply -f - >/dev/null
ready_reason() { k -n "$ns" get isvc hostpath -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'; }
refused_in_status() { [[ "$(ready_reason)" == InvalidSpec ]]; }
wait_until "hostpath to be refused in its status" refused_in_status
message="$(k -n "$ns" get isvc hostpath -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
[[ "$message" == *spec.predictor.model.storageUri* && "$message" == *allowHostPath* ]] \
  || fail "the refusal does not name the field and the setting: $message"
[[ -z "$(k -n "$ns" get deployments -l serving.kserve.io/inferenceservice=hostpath -o name)" ]] \
  || fail "a revision was made for a refused file:// InferenceService"
log "     status: ${message}"
k -n "$ns" delete isvc hostpath --wait=true >/dev/null
skiff_config true
sleep 2 # the controller's ConfigMap watch, before the figures create file:// InferenceServices
pass "allowHostPath false: a file:// InferenceService gets no revision, Ready False (InvalidSpec) naming the field and the setting"

# --- figures: 200 InferenceServices at once ----------------------------------------------------------------
proc_cpu_s() { # pid -> user+system CPU seconds
  local rest
  rest="$(sed 's/^.*) //' "/proc/$1/stat")"
  read -r -a f <<<"$rest"
  awk -v u="${f[11]}" -v s="${f[12]}" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (u + s) / hz}'
}
proc_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
log "figures (controller pid $pid_b):"
if ((pods)); then
  start_ms="$(now_ms)"
  iris "file://$model" | sed 's/name: iris/name: solo/' | k apply -f - >/dev/null
  k -n "$ns" wait --for=condition=Ready isvc/solo --timeout="${timeout}s" >/dev/null || fail "solo not Ready"
  log "  one InferenceService (one skiff-server pod): kubectl apply to Ready $(secs $(($(now_ms) - start_ms))) s"
  k -n "$ns" delete isvc solo --wait=true >/dev/null
else
  log "  one InferenceService: n/a (no pods)"
fi
# One bulk round: COUNT InferenceServices created by 4 kubectl processes at once, then polled
# until all are Ready. Prints the wall time, the spread of creation-to-Ready per object (from the
# API's timestamps, whole seconds), and the controller's CPU time over the round.
bulk_round() { # namespace with-pods(0|1) count
  local bns="$1" with_pods="$2" n="$3" annotations="" extra="" cpu0 cpu1 start_ms created_ms bulk_ms deadline mode
  k create namespace "$bns" >/dev/null
  if ((!with_pods)); then
    annotations='  annotations: {autoscaling.knative.dev/initial-scale: "0"}'
    extra="    minReplicas: 0"
  fi
  rm -f "$work"/bulk-*.yaml
  for i in $(seq 0 $((n - 1))); do
    printf -- '---\napiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: m%03d\n  namespace: %s\n%s\nspec:\n  predictor:\n%s\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file://%s\n' \
      "$i" "$bns" "$annotations" "$extra" "$model" >>"$work/bulk-$((i % 4)).yaml"
  done
  count_ready() {
    k -n "$bns" get isvc -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true
  }
  local api_pid kcm_pid api0 kcm0
  api_pid="$(cat "$dir/pids/kube-apiserver.pid")"
  kcm_pid="$(cat "$dir/pids/kube-controller-manager.pid")"
  api0="$(proc_cpu_s "$api_pid")"
  kcm0="$(proc_cpu_s "$kcm_pid")"
  cpu0="$(proc_cpu_s "$pid_b")"
  start_ms="$(now_ms)"
  local creators=()
  for f in "$work"/bulk-*.yaml; do
    k create -f "$f" >/dev/null &
    creators+=($!)
  done
  for c in "${creators[@]}"; do wait "$c" || fail "kubectl create of the bulk InferenceServices failed"; done
  created_ms=$(($(now_ms) - start_ms))
  deadline=$((SECONDS + timeout * 5))
  while (($(count_ready) < n)); do
    ((SECONDS < deadline)) || fail "only $(count_ready) of $n InferenceServices Ready after $((timeout * 5)) s"
    sleep 0.5
  done
  bulk_ms=$(($(now_ms) - start_ms))
  cpu1="$(proc_cpu_s "$pid_b")"
  mode="$( ((with_pods)) && echo "one skiff-server pod each" || echo "initial scale 0: no pods, control plane only")"
  log "  $n InferenceServices ($mode): created by 4 kubectl in $(secs "$created_ms") s, all Ready $(secs "$bulk_ms") s after the first create"
  k -n "$bns" get isvc -o json | python3 -c '
import json, sys
from datetime import datetime
def t(s): return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")
d = sorted((t([c for c in i["status"]["conditions"] if c["type"] == "Ready"][0]["lastTransitionTime"])
            - t(i["metadata"]["creationTimestamp"])).total_seconds() for i in json.load(sys.stdin)["items"])
q = lambda p: d[min(len(d) - 1, int(p * len(d)))]
print(f"      creation to Ready per InferenceService: p50 {q(0.5):.0f} s, p90 {q(0.9):.0f} s, max {d[-1]:.0f} s")' |
    while IFS= read -r line; do log "$line"; done
  if ((with_pods)); then
    # Where the time goes: the pod's own Ready (kubelet, containerd, skiff-server start, probe) versus the
    # InferenceService's Ready after it (the controller noticing the available Deployment).
    { k -n "$bns" get pods -o json; k -n "$bns" get deployments -o json; k -n "$bns" get isvc -o json; } | python3 -c '
import json, sys
from datetime import datetime
def t(s): return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")
def cond(o, kind): return t([c for c in o["status"]["conditions"] if c["type"] == kind][0]["lastTransitionTime"])
def owner(o): return o["metadata"]["labels"]["serving.kserve.io/inferenceservice"]
dec, text, docs = json.JSONDecoder(), sys.stdin.read(), []
while text.strip():
    doc, end = dec.raw_decode(text.lstrip()); docs.append(doc); text = text.lstrip()[end:]
pods, deployments, isvcs = (d["items"] for d in docs)
pod = {}
for p in pods: pod[owner(p)] = min(pod.get(owner(p), cond(p, "Ready")), cond(p, "Ready"))
available = {owner(d): cond(d, "Available") for d in deployments}
steps = {"creation to pod Ready (scheduler, kubelet, containerd, skiff-server start, probe)": [],
         "pod Ready to Deployment Available (kube-controller-manager)": [],
         "Deployment Available to InferenceService Ready (skiff-controller)": []}
for i in isvcs:
    n = i["metadata"]["name"]
    if n not in pod or n not in available: continue
    for (k, v), d in zip(steps.items(), (pod[n] - t(i["metadata"]["creationTimestamp"]), available[n] - pod[n], cond(i, "Ready") - available[n])):
        v.append(d.total_seconds())
for k, v in steps.items():
    v.sort(); print(f"      {k}: p50 {v[len(v) // 2]:.0f} s, max {v[-1]:.0f} s")' |
      while IFS= read -r line; do log "$line"; done
  fi
  delta() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }
  log "      CPU over the round (user+system): skiff-controller $(delta "$cpu0" "$cpu1") s, kube-apiserver $(delta "$api0" "$(proc_cpu_s "$api_pid")") s, kube-controller-manager $(delta "$kcm0" "$(proc_cpu_s "$kcm_pid")") s"
}
if ((bulk > 0)); then
  bulk_round e2e-bulk-nopods 0 "$bulk"
fi
if ((pods && bulk_pods > 0)); then
  bulk_round e2e-bulk 1 "$bulk_pods"
else
  skip "InferenceServices with a pod each ($( ((pods)) && echo "SKIFF_E2E_BULK_PODS=0" || echo "no node"))"
fi
if ((bulk > 0 || (pods && bulk_pods > 0))); then
  failures="$(curl -fsS "http://127.0.0.1:$admin_port_b/metrics" |
    sed -n 's/^skiff_controller_reconcile_failures_total{error="\(.*\)"} \(.*\)/\1=\2/p' | tr '\n' ' ')"
  log "  controller totals: reconciles $(metric "$admin_port_b" skiff_controller_reconciles_total), status writes $(metric "$admin_port_b" skiff_controller_status_writes_total) (+ $(metric "$admin_port_b" skiff_controller_status_conflicts_total) refused as stale and retried), failed reconciles by kind: ${failures:-none}"
fi
log "  controller CPU total $(proc_cpu_s "$pid_b") s, RSS now $(proc_kib "$pid_b" VmRSS) KiB, peak RSS (VmHWM) $(proc_kib "$pid_b" VmHWM) KiB"

passed=1
if ((${#skipped[@]})); then
  log "PASS with ${#skipped[@]} part(s) skipped:"
  for s in "${skipped[@]}"; do log "  - $s"; done
else
  log "PASS"
fi
