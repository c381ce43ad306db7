#!/usr/bin/env bash
# End-to-end test of models from a real store on a local cluster (scripts/local-cluster.sh up: the
# real control plane of tests/cluster, the real node of tests/cluster/node.sh, deploy/base applied
# with the local images), with the node cache of deploy/node-cache and Skiff's fetcher (images built
# from deploy/docker/fetch.Dockerfile) as the storage initializer.
#
#   tests/cluster/e2e-storage.sh     # build, local-cluster up, checks, local-cluster down
#
# MinIO (tests/stores/build.sh) runs on the host at the node's IP, with the bucket `models` holding
# examples/models/iris/model.onnx at iris/model.onnx. deploy/node-cache is applied as it is except
# its image (localhost/skiff-model-cache:$SKIFF_LOCAL_TAG) and its hostPath, which is moved under the
# cluster's state folder.
#   1. the DaemonSet skiff-model-cache is Ready in skiff-node (privileged namespace): its pod in the
#      pod network (its own IP) answers at its node-local Service (internalTrafficPolicy Local),
#      after its init step own-cache gave the cache folder to 65532
#   2. iris (storageUri s3://models/iris, serviceAccountName reader, minReplicas 0) in a namespace
#      that enforces the restricted Pod Security profile: Secret minio (KServe's annotations
#      s3-endpoint, s3-usehttps, s3-verifyssl, s3-region; AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and
#      ServiceAccount reader listing it. The revision's storage-initializer is skiff-fetch with
#      --node-cache http://skiff-model-cache.skiff-node.svc.cluster.local:8095 (the Service, by the
#      cluster DNS; NetworkPolicy skiff-model-cache admits the model pod), its credentials secretKeyRefs (no value in the Deployment)
#   3. the first V2 infer through the router scales iris from zero: the init container's report says
#      it came through the node cache, which downloaded the model (downloaded = its size)
#   4. idle, iris scales to zero; the next infer brings a new pod whose init container's report
#      says the node cache had the model: downloaded 0; the node cache's /metrics count one download
#      and one hit
#   5. denied (same model, a ServiceAccount whose secret has a wrong key): its init container ends
#      with exit code 4 and "access denied" in its termination message, though the model is cached
#   6. nope (storageUri s3://models/nope, not in the store): a request is answered 503 with
#      ModelLoadFailed and the store's "not found" as soon as the init container has failed (exit
#      code 3), not held for the activator's 300 s (curl's bound is 60 s); the status says it too
#      (PredictorReady ModelLoadFailed, modelStatus BlockedByFailedLoad with lastFailureInfo); a
#      second request is answered at once
# Each cold start's time (request sent to answer) is printed: the figures of an empty and a warm node cache.
# Exit status 0 only if every check passed; `local-cluster.sh down` runs on every exit (state and
# logs kept on failure, with the tails of the pods' logs printed).
#
# Environment: SKIFF_E2E_NO_BUILD=1 skips `cargo build --workspace`; SKIFF_E2E_TIMEOUT (seconds per
# wait, 120); the local-cluster variables (SKIFF_CLUSTER_DIR defaults to /tmp/skiff-e2e-storage,
# ports to 7143/3079/10957/10959).
set -euo pipefail

e2e_name=e2e-storage
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-storage}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-7143}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-3079}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10957}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10959}"
export SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
ns=e2e-storage

e2e_build
e2e_need_root "the real node needs root"
for b in skiff-fetch skiff-model-cache; do
  [[ -x "$root/target/$SKIFF_LOCAL_PROFILE/$b" ]] || fail "no target/$SKIFF_LOCAL_PROFILE/$b: run cargo build --workspace"
done
stores="$("$root/tests/stores/build.sh")" || fail "tests/stores/build.sh failed"

cluster_started=0
passed=0
minio_pid=
cleanup() {
  local rc=$?
  set +e
  [[ -n "$minio_pid" ]] && kill "$minio_pid" 2>/dev/null && wait "$minio_pid" 2>/dev/null
  if ((cluster_started)); then
    if ((passed)); then
      "$root/scripts/local-cluster.sh" down >/dev/null || rc=1
    else
      e2e_log_tails skiff-system skiff-node "$ns"
      echo "---- $dir/minio.log (tail) ----"
      tail -n 25 "$dir/minio.log"
      KEEP_STATE=1 "$root/scripts/local-cluster.sh" down
      echo "state and logs kept in $dir"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "scripts/local-cluster.sh up"
cluster_started=1
"$root/scripts/local-cluster.sh" up 2>&1 | sed 's/^/    /'
export KUBECONFIG="$dir/admin.kubeconfig"
router="$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-router -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
  awk '$2 == "True" && $1 != "" {print $1 ":8080"; exit}')"
[[ -n "$router" ]] || fail "no Ready router pod"
node_ip="$(k get nodes -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}')"
[[ -n "$node_ip" ]] || fail "the node has no InternalIP"

# --- the store: MinIO on the node's IP (pods reach the host there, through the bridge) -------------
mkdir -p "$dir/minio/models/iris"
minio_port="$(python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$node_ip")"
MINIO_ROOT_USER=skiffadmin MINIO_ROOT_PASSWORD=skiffsecret MINIO_BROWSER=off MINIO_UPDATE=off \
  "$stores/minio" server "$dir/minio" --address "$node_ip:$minio_port" --anonymous >"$dir/minio.log" 2>&1 &
minio_pid=$!
s3="http://$node_ip:$minio_port"
wait_until "MinIO at $s3" curl -fsS -o /dev/null "$s3/minio/health/live"
model="$root/examples/models/iris/model.onnx"
model_bytes="$(stat -c %s "$model")"
curl -fsS -o /dev/null --aws-sigv4 aws:amz:us-east-1:s3 --user skiffadmin:skiffsecret -T "$model" "$s3/models/iris/model.onnx" ||
  fail "uploading the iris model to MinIO"
pass "MinIO at $s3 holds s3://models/iris/model.onnx ($model_bytes bytes)"

# --- 1. the node cache ------------------------------------------------------------------------------
k kustomize "$root/deploy/node-cache" | sed -e "s#path: /var/lib/skiff/model-cache#path: $dir/model-cache#" \
  -e "s#image: ghcr.io/skiff-serving/skiff-model-cache:.*#image: localhost/skiff-model-cache:$SKIFF_LOCAL_TAG#" |
  k apply -f - >/dev/null
k -n skiff-node rollout status daemonset/skiff-model-cache --timeout="${timeout}s" >/dev/null ||
  fail "1. the DaemonSet skiff-model-cache is not Ready"
cache="$(k -n skiff-node get service skiff-model-cache -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port} {.spec.internalTrafficPolicy}')"
[[ "$cache" == *" Local" ]] || fail "1. Service skiff-model-cache: $cache (wanted internalTrafficPolicy Local)"
cache="${cache% *}"
wait_until "the node cache at its Service $cache" curl -fsS -o /dev/null "http://$cache/healthz"
cache_pod="$(k -n skiff-node get pods -l app.kubernetes.io/name=skiff-model-cache \
  -o jsonpath='{.items[0].spec.hostNetwork} {.items[0].status.podIP} {.items[0].status.initContainerStatuses[0].name}={.items[0].status.initContainerStatuses[0].state.terminated.exitCode}')"
[[ "$cache_pod" == " "* && "$cache_pod" != *" $node_ip "* && "$cache_pod" == *" own-cache=0" ]] ||
  fail "1. the node cache's pod (hostNetwork, pod IP, init step): '$cache_pod' (wanted no host network, its own IP, own-cache=0)"
[[ "$(stat -c %u:%g "$dir/model-cache")" == 65532:65532 ]] ||
  fail "1. the cache folder belongs to $(stat -c %u:%g "$dir/model-cache"), not 65532:65532"
pass "1. DaemonSet skiff-model-cache Ready in skiff-node: pod IP ${cache_pod#* }, answering at its node-local Service $cache; $dir/model-cache belongs to 65532:65532"

# --- 2. the InferenceService, its credentials and its pod's profile ------------------------------------
k -n skiff-system patch configmap inferenceservice-config --type merge \
  -p '{"data": {"autoscaler": "{\"allow-zero-initial-scale\": \"true\", \"initial-scale\": \"0\", \"stable-window\": \"6s\", \"scale-to-zero-grace-period\": \"2s\"}"}}' >/dev/null
sleep 3
k create namespace "$ns" >/dev/null
k label namespace "$ns" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/enforce-version=latest >/dev/null
credentials() { # secret account access-secret
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: $ns
  annotations:
    serving.kserve.io/s3-endpoint: "$node_ip:$minio_port"
    serving.kserve.io/s3-usehttps: "0"
    serving.kserve.io/s3-verifyssl: "0"
    serving.kserve.io/s3-region: us-east-1
type: Opaque
stringData:
  AWS_ACCESS_KEY_ID: skiffadmin
  AWS_SECRET_ACCESS_KEY: "$3"
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: $2, namespace: $ns}
secrets:
  - name: $1
EOF
}
isvc() { # name account [storageUri]
  k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: $1, namespace: $ns}
spec:
  predictor:
    minReplicas: 0
    serviceAccountName: $2
    model:
      modelFormat: {name: onnx}
      storageUri: ${3:-s3://models/iris}
EOF
}
get() { k -n "$ns" get "$1" -o jsonpath="$2"; }
ready() { [[ "$(get "isvc/$1" '{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
pods() { k -n "$ns" get pods -l "serving.kserve.io/inferenceservice=$1" --no-headers 2>/dev/null | wc -l; }
no_pods() { [[ "$(pods "$1")" == 0 ]]; }
credentials minio reader skiffsecret
isvc iris reader
wait_until "iris Ready" ready iris
rev=iris-predictor-00001
init="$(k -n "$ns" get "deployment/$rev" -o json | python3 -c '
import json, sys
pod = json.load(sys.stdin)["spec"]["template"]["spec"]
init = pod["initContainers"][0]
env = {e["name"]: e.get("value") or e.get("valueFrom") for e in init.get("env", [])}
print(init["name"], init["image"], " ".join(init["args"]))
print(json.dumps(env["AWS_SECRET_ACCESS_KEY"], sort_keys=True), env.get("AWS_ENDPOINT_URL"), pod.get("serviceAccountName"))')"
[[ "$init" == *"storage-initializer localhost/skiff-fetch:$SKIFF_LOCAL_TAG"*" s3://models/iris /mnt/models --node-cache http://skiff-model-cache.skiff-node.svc.cluster.local:8095"* ]] ||
  fail "2. $rev's init container: $init"
[[ "$init" == *'{"secretKeyRef": {"key": "AWS_SECRET_ACCESS_KEY", "name": "minio"}}'*"http://$node_ip:$minio_port reader"* ]] ||
  fail "2. $rev's credentials: $init"
! k -n "$ns" get "deployment/$rev" -o yaml | grep -q skiffsecret || fail "2. the secret's value is in $rev"
pass "2. $rev: storage-initializer is skiff-fetch with --node-cache, its S3 key a secretKeyRef and its endpoint from the secret's annotations (no secret value in the Deployment)"

# --- 3. a cold start with an empty node cache -------------------------------------------------------------
host="$(get isvc/iris '{.status.url}')"
host="${host#*://}"
body='{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'
infer() { # -> "code seconds"
  curl -sS -m 120 -o "$dir/answer.json" -w '%{http_code} %{time_total}' -H "Host: $host" \
    -H 'Content-Type: application/json' "http://$router/v2/models/iris/infer" -d "$body"
}
report() { # pod -> the storage initializer's JSON line
  k -n "$ns" logs "$1" -c storage-initializer 2>/dev/null | grep -h '"fetched"' | tail -n 1
}
field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
[[ "$(pods iris)" == 0 ]] || fail "3. iris has pods before any request"
read -r code cold <<<"$(infer)" || fail "3. the infer through $router failed"
[[ "$code" == 200 ]] || fail "3. the infer answered $code: $(cat "$dir/answer.json")"
pod="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=iris -o jsonpath='{.items[0].metadata.name}')"
line="$(report "$pod")"
[[ -n "$line" ]] || fail "3. no report from $pod's storage-initializer"
[[ "$(field "$line" via)" == node-cache && "$(field "$line" downloaded)" == "$model_bytes" && "$(field "$line" cached)" == False ]] ||
  fail "3. the first cold start's init container reported $line (wanted via node-cache, downloaded $model_bytes)"
pass "3. the first V2 infer scaled iris from zero in ${cold} s (empty node cache): $pod's init container: $line"

# --- 4. scale to zero, and a cold start from the node cache -------------------------------------------------
start=$SECONDS
wait_until "iris at zero pods" no_pods iris
pass "4. idle, iris scaled to zero in $((SECONDS - start)) s"
read -r code warm <<<"$(infer)" || fail "4. the second infer failed"
[[ "$code" == 200 ]] || fail "4. the second infer answered $code: $(cat "$dir/answer.json")"
second="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=iris -o jsonpath='{.items[0].metadata.name}')"
[[ "$second" != "$pod" ]] || fail "4. the same pod $pod answered (it was not scaled to zero)"
line="$(report "$second")"
[[ "$(field "$line" via)" == node-cache && "$(field "$line" downloaded)" == 0 && "$(field "$line" cached)" == True ]] ||
  fail "4. the second cold start's init container reported '$line' (wanted via node-cache, downloaded 0)"
pass "4. the second cold start (new pod $second) in ${warm} s downloaded nothing: $line"
metric() { curl -fsS "http://$cache/metrics" | awk -v name="$1" '$1 == name {print $2}'; }
counts="$(metric 'skiff_model_cache_requests_total{outcome="download"}') $(metric 'skiff_model_cache_requests_total{outcome="hit"}') $(metric skiff_model_cache_downloaded_bytes_total)"
[[ "$counts" == "1 1 $model_bytes" ]] || fail "4. the node cache's metrics say downloads, hits, bytes: $counts (wanted 1 1 $model_bytes)"
pass "4. the node cache's /metrics: 1 download, 1 hit, $model_bytes bytes downloaded in all"
log "cold start through the router, iris ($model_bytes bytes) from s3://: empty node cache ${cold} s, warm node cache ${warm} s"

# --- 5. credentials the store refuses get nothing from the cache ----------------------------------------------
credentials wrong denier not-the-secret
isvc denied denier
wait_until "denied Ready (no pod yet)" ready denied
host_denied="$(get isvc/denied '{.status.url}')"
curl -sS -m 15 -o /dev/null -H "Host: ${host_denied#*://}" -H 'Content-Type: application/json' \
  "http://$router/v2/models/denied/infer" -d "$body" || true
terminated() {
  local state
  state="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=denied -o jsonpath='{.items[0].status.initContainerStatuses[0].lastState.terminated.exitCode}{.items[0].status.initContainerStatuses[0].state.terminated.exitCode}')"
  [[ -n "$state" ]]
}
wait_until "denied's init container to end" terminated
status="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=denied -o json | python3 -c '
import json, sys
s = json.load(sys.stdin)["items"][0]["status"]["initContainerStatuses"][0]
t = s["state"].get("terminated") or s["lastState"].get("terminated")
print(t["exitCode"], t.get("message", ""))')"
[[ "$status" == "4 fetching the model failed: s3://models/iris: access denied"* ]] ||
  fail "5. denied's init container ended with: $status"
[[ "$status" != *not-the-secret* ]] || fail "5. the termination message shows the secret"
pass "5. denied (a wrong secret) got nothing from the node cache: exit $status"

# --- 6. a model that is not in the store: 503 and the reason, not a 300 s hold ----------------------------
isvc nope reader s3://models/nope
wait_until "nope Ready (no pod yet)" ready nope
host_nope="$(get isvc/nope '{.status.url}')"
ask_nope() { # -> "code seconds"
  curl -sS -m 60 -o "$dir/nope.json" -w '%{http_code} %{time_total}' -H "Host: ${host_nope#*://}" \
    -H 'Content-Type: application/json' "http://$router/v2/models/nope/infer" -d "$body"
}
rm -f "$dir/nope.json"
read -r code first <<<"$(ask_nope)" || fail "6. the infer to nope failed"
answer="$(cat "$dir/nope.json" 2>/dev/null || true)"
[[ "$code" == 503 && "$answer" == *ModelLoadFailed* && "$answer" == *"s3://models/nope"*"not found"* ]] ||
  fail "6. nope answered $code in $first s: $answer (wanted 503, ModelLoadFailed, not found)"
model_status() {
  get isvc/nope '{.status.modelStatus.transitionStatus} {.status.modelStatus.lastFailureInfo.location} {.status.modelStatus.lastFailureInfo.exitCode} {.status.conditions[?(@.type=="PredictorReady")].reason}'
}
[[ "$(model_status)" == "BlockedByFailedLoad storage-initializer 3 ModelLoadFailed" ]] ||
  fail "6. nope's status: $(model_status) (wanted BlockedByFailedLoad storage-initializer 3 ModelLoadFailed)"
read -r code again <<<"$(ask_nope)" || fail "6. the second infer to nope failed"
[[ "$code" == 503 ]] || fail "6. the second infer to nope answered $code: $(cat "$dir/nope.json")"
pass "6. nope (s3://models/nope): 503 in ${first} s on the first request (a pod started and its fetch failed), ${again} s on the next: $answer"
pass "6. nope's status: modelStatus $(model_status | cut -d' ' -f1-3), PredictorReady $(model_status | cut -d' ' -f4): $(get isvc/nope '{.status.modelStatus.lastFailureInfo.message}')"

k -n "$ns" delete isvc iris denied nope --wait=true >/dev/null
passed=1
log "PASS: every check passed in $((SECONDS - t0)) s"
