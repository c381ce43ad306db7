#!/usr/bin/env bash
# End-to-end test of KServe's ServingRuntimes, and of an LLM's OpenAI streams, on a local cluster
# (scripts/local-cluster.sh up: the real control plane of tests/cluster and the real node, the
# kubelet and containerd running Skiff's images built from deploy/docker/, kube-proxy and CoreDNS;
# deploy/base with the local images, which installs the ServingRuntime and ClusterServingRuntime
# CRDs). New revisions start at zero (initial scale 0), with a 6 s stable window and a 2 s
# scale-to-zero grace. The model servers the runtimes name run as images too, built on Debian's
# python3 by `tests/cluster/images.sh DIR runtimes` (cached like Skiff's, by their inputs) and
# imported into the node's containerd; each runtime is applied through a kustomize overlay whose
# only change is `images:`, as a user pointing a runtime at a mirror would.
#
#   tests/cluster/e2e-runtimes.sh     # build, local-cluster up, checks, local-cluster down
#
# The ClusterServingRuntime tests/fixtures/runtimes/v2-test-runtime.yaml (sklearn, autoSelect, V2)
# has image ghcr.io/skiff-serving/skiff-v2-test-server:0.1, set to localhost/skiff-v2-test-server
# (tests/cluster/images/v2-test-server.Dockerfile: tests/fixtures/v2_server.py, KServe's V2 REST
# protocol in the standard library). file:// storageUris are hostPath volumes, read as uid 65532.
#   1. sum (modelFormat sklearn, no runtime named, storageUri file://tests/fixtures/models/v2-sum,
#      minReplicas 0) is Ready with no pod, its revision records the runtime; the first V2 infer
#      through a router pod (IP:8080, Host of status.url) scales it from zero through the
#      queue-proxy and answers what v2_server.py computes from model.json (2 * sum(row) + 0.5:
#      [6.5, 14.5]), so the runtime's container ran with the model where storage put it
#   2. odd (modelFormat nosuchformat) gets PredictorReady False, reason NoSupportingRuntime, with a
#      message that names nosuchformat, and no Deployment; then a ServingRuntime for nosuchformat
#      appears in its namespace (same image): the controller's runtime watch re-checks odd, which
#      becomes Ready on it (well before the back-off of its failed reconciles would retry) and answers
#   3. deleting both removes their children
#   4. the test runtime goes and KServe's default runtimes (deploy/runtimes, `kubectl apply -k` of an
#      overlay setting kserve/sklearnserver to localhost/skiff-sklearnserver: the kserve-runtimes
#      peer venv's packages with the stand-in of bench/peers/kserve-runtimes, entrypoint
#      `python3 -m sklearnserver`) are installed; sklearn-iris, KServe's sample with its `predictor.sklearn:`
#      shorthand and the storageUri of a model.joblib that tests/fixtures/sklearn_iris.py trains, gets
#      a revision on ClusterServingRuntime kserve-sklearnserver (image localhost/skiff-sklearnserver),
#      and its V1 predict of the sample's iris-input.json through the router scales it from zero and
#      answers what scikit-learn predicts with that file; its v2 variant (protocolVersion v2) gets a
#      revision on kserve-mlserver with the variables KServe's defaulting gives MLServer
#   5. an LLM from zero through a router pod, by the model named in the body: llama.cpp's OpenAI
#      server (tests/llm/setup.sh: llama-cpp-python[server] in .bench/llm-venv and a tiny
#      random-weight GGUF) on examples/runtimes/llama-cpp-server.yaml, with its image set to
#      localhost/skiff-llama-cpp-python (the venv's packages on Debian's python3); its container's
#      command `python3 -m llama_cpp.server` is the image's.
#      llama (modelFormat gguf, storageUri file://$dir/models/llama holding the GGUF as model.gguf,
#      minReplicas 0, maxReplicas 1, containerConcurrency 2, the runtime's 2-CPU request lowered to 1
#      for a 2-core node) is Ready with no pod on ClusterServingRuntime/llama-cpp-server; then
#      cli/tests/openai_cluster.rs (cargo test --test openai_cluster, against the router pod's IP:8080
#      with no InferenceService Host): GET /openai/v1/models lists llama, and a streamed
#      POST /openai/v1/chat/completions naming it scales it from zero and streams several events, in
#      several reads of the body, to [DONE] (the usage's token count checked when the server sends
#      one); idle, llama goes back to zero pods, and ten streams sent at zero all complete
#   6. each event reaches the client when the server writes it: lockstep, a custom container
#      (`containers:`, image skiff-python, tests/fixtures/lockstep_sse.py as -c) at zero, streams four
#      chunks and [DONE] from zero through router pod -> activator -> queue-proxy -> container; the
#      server writes event n+1 only once the client has read event n (handshake files in
#      $dir/lockstep-events, a hostPath volume of the pod, owned by its uid 65532), and the client fails
#      if the server had written more when an event arrived; it prints when each event was written
#      and when it arrived, and the gap (printed, never a bound)
# Exit status 0 only if every check passed; `local-cluster.sh down` runs on every exit (state and
# logs kept on failure, with the tails of the pods' logs printed).
#
# Needs PEERS=kserve-runtimes bench/peers/setup.sh (part 4) and tests/llm/setup.sh (part 5).
# Environment: SKIFF_E2E_NO_BUILD=1 skips `cargo build --workspace` (the test binary of parts 5 and 6
# is still built by cargo test if needed); SKIFF_E2E_TIMEOUT (seconds per
# wait, 120); the local-cluster variables (SKIFF_CLUSTER_DIR defaults to /tmp/skiff-e2e-runtimes,
# ports to 6943/2879/10757/10759).
set -euo pipefail

e2e_name=e2e-runtimes
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-runtimes}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-6943}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2879}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10757}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10759}"
export SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
ns=e2e-runtimes
# The model servers' images (tests/cluster/images.sh ... runtimes) and the custom containers' python3.
image_of() { echo "localhost/$1:$SKIFF_LOCAL_TAG"; }
py_image="$(image_of skiff-python)"

e2e_build
e2e_need_root "a node needs root (containerd, the kubelet, iptables)"
runtimes_python="$root/.bench/kserve-runtimes-venv/bin/python3"
[[ -x "$runtimes_python" ]] || fail "$runtimes_python is missing: run PEERS=kserve-runtimes bench/peers/setup.sh"
llm_venv="$root/.bench/llm-venv"
llm_model="$root/.bench/llm/tiny-llama.gguf"
[[ -x "$llm_venv/bin/python3" && -f "$llm_model" ]] || fail "llama.cpp's server or its model is missing: run tests/llm/setup.sh"

work="$(mktemp -d /tmp/skiff-e2e-runtimes.XXXXXX)" # the model servers' archives (up empties $dir)
cluster_started=0
passed=0
cleanup() {
  local rc=$?
  set +e
  rm -rf "$work"
  if ((cluster_started)); then
    if ((passed)); then
      "$root/scripts/local-cluster.sh" down >/dev/null || rc=1
    else
      e2e_log_tails skiff-system "$ns"
      KEEP_STATE=1 "$root/scripts/local-cluster.sh" down
      echo "state and logs kept in $dir"
    fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start=$SECONDS
"$root/tests/cluster/images.sh" "$work/images" runtimes >/dev/null || fail "tests/cluster/images.sh ... runtimes failed"
log "the model servers' images in $((SECONDS - start)) s"
log "scripts/local-cluster.sh up"
cluster_started=1
"$root/scripts/local-cluster.sh" up 2>&1 | sed 's/^/    /'
[[ "${PIPESTATUS[0]}" == 0 ]] || fail "scripts/local-cluster.sh up failed"
export KUBECONFIG="$dir/admin.kubeconfig"
start=$SECONDS
e2e_import_images "$work/images"
log "the model servers' images imported into the node's containerd in $((SECONDS - start)) s"
router="$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-router -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
  awk '$2 == "True" && $1 != "" {print $1 ":8080"; exit}')"
[[ -n "$router" ]] || fail "no Ready router pod"

# apply_with_image RESOURCE IMAGE LOCAL: kubectl apply -k of an overlay of RESOURCE (a kustomization
# folder, or a file, copied in) whose only change is `images:` IMAGE -> localhost/LOCAL:<tag>.
apply_with_image() {
  local overlay resource
  overlay="$(mktemp -d "$dir/overlay.XXXXXX")"
  if [[ -d "$1" ]]; then
    resource="$(realpath --relative-to="$overlay" "$1")"
  else
    cp "$1" "$overlay/"
    resource="${1##*/}"
  fi
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\nimages:\n  - {name: %s, newName: localhost/%s, newTag: %s}\n' \
    "$resource" "$2" "$3" "$SKIFF_LOCAL_TAG" >"$overlay/kustomization.yaml"
  k apply -k "$overlay" >/dev/null
}
# New revisions start with no pod (the first request brings one).
k -n skiff-system patch configmap inferenceservice-config --type merge \
  -p '{"data": {"autoscaler": "{\"allow-zero-initial-scale\": \"true\", \"initial-scale\": \"0\", \"stable-window\": \"6s\", \"scale-to-zero-grace-period\": \"2s\"}"}}' >/dev/null
sleep 3
k wait --for=condition=Established crd/servingruntimes.serving.kserve.io crd/clusterservingruntimes.serving.kserve.io \
  --timeout=60s >/dev/null || fail "the runtime CRDs are not Established (deploy/crds through deploy/base)"
apply_with_image "$root/tests/fixtures/runtimes/v2-test-runtime.yaml" ghcr.io/skiff-serving/skiff-v2-test-server skiff-v2-test-server
k create namespace "$ns" >/dev/null
pass "Skiff is up (router $router); ClusterServingRuntime skiff-v2-test-runtime applied with image $(image_of skiff-v2-test-server)"

isvc() { # name format
  k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: $1, namespace: $ns}
spec:
  predictor:
    minReplicas: 0
    model:
      modelFormat: {name: $2}
      protocolVersion: v2
      storageUri: file://$root/tests/fixtures/models/v2-sum
EOF
}
get() { k -n "$ns" get "$1" -o jsonpath="$2"; }
condition() { get "isvc/$1" "{.status.conditions[?(@.type==\"$2\")].$3}"; }
ready() { [[ "$(condition "$1" Ready status)" == True ]]; }
refused() { [[ "$(condition "$1" PredictorReady status)" == False && -n "$(condition "$1" PredictorReady message)" ]]; }
pods() { k -n "$ns" get pods -l "serving.kserve.io/inferenceservice=$1" --no-headers 2>/dev/null | wc -l; }
deployments() { k -n "$ns" get deployments -l "serving.kserve.io/inferenceservice=$1" --no-headers 2>/dev/null | wc -l; }
at_zero() { [[ "$(pods "$1")" == 0 ]]; }
none_left() { [[ "$(deployments "$1")" == 0 && "$(k -n "$ns" get services -l "serving.kserve.io/inferenceservice=$1" --no-headers 2>/dev/null | wc -l)" == 0 ]]; }

# --- 1. sklearn on the auto-selected runtime, from zero ---------------------------------------------
isvc sum sklearn
wait_until "sum Ready" ready sum
rev=sum-predictor-00001
[[ "$(pods sum)" == 0 ]] || fail "1. sum has pods before any request"
chosen="$(get "deployment/$rev" '{.metadata.annotations.skiff\.dev/runtime}')"
[[ "$chosen" == ClusterServingRuntime/skiff-v2-test-runtime ]] || fail "1. $rev records runtime '$chosen'"
containers="$(get "deployment/$rev" '{range .spec.template.spec.containers[*]}{.name}={.image} {end}')"
[[ "$containers" == *"kserve-container=$(image_of skiff-v2-test-server)"*"queue-proxy="* ]] ||
  fail "1. $rev runs $containers"
pass "1. sum (sklearn) Ready with 0 pods on $chosen: $containers"

host="$(get isvc/sum '{.status.url}')"
host="${host#*://}"
body='{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3,4]}]}'
start=$SECONDS
code="$(curl -sS -m 120 -o "$dir/answer.json" -w '%{http_code}' -H "Host: $host" -H 'Content-Type: application/json' \
  "http://$router/v2/models/sum/infer" -d "$body")" || fail "1. the infer through $router failed"
answer="$(cat "$dir/answer.json")"
[[ "$code" == 200 ]] || fail "1. the infer answered $code: $answer"
outputs="$(python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["model_name"], r["outputs"][0]["data"])' <<<"$answer")"
[[ "$outputs" == "sum [6.5, 14.5]" ]] || fail "1. the infer answered $answer, not sum [6.5, 14.5]"
((${#answer} > 0 && $(pods sum) >= 1)) || fail "1. no pod of sum after the request"
pass "1. the first V2 infer through the router (Host $host) scaled sum from zero in $((SECONDS - start)) s and answered $outputs (model.json read from the storageUri)"

# --- 2. a format no runtime serves -------------------------------------------------------------------
isvc odd nosuchformat
wait_until "odd PredictorReady False" refused odd
reason="$(condition odd PredictorReady reason)"
message="$(condition odd PredictorReady message)"
[[ "$reason" == NoSupportingRuntime && "$message" == *nosuchformat* ]] ||
  fail "2. odd's PredictorReady: reason '$reason', message '$message'"
[[ "$(condition odd Ready status)" == False && "$(deployments odd)" == 0 ]] || fail "2. odd is Ready or has a Deployment"
pass "2. odd (nosuchformat): PredictorReady False, $reason: $message; no Deployment"

k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata: {name: nosuch-runtime, namespace: $ns}
spec:
  supportedModelFormats: [{name: nosuchformat, autoSelect: true}]
  protocolVersions: [v2]
  containers:
    - name: kserve-container
      image: $(image_of skiff-v2-test-server)
      args: ["--model_name={{.Name}}"]
EOF
start=$SECONDS
wait_until "odd Ready once its runtime exists" ready odd
chosen="$(get deployment/odd-predictor-00001 '{.metadata.annotations.skiff\.dev/runtime}')"
[[ "$chosen" == ServingRuntime/nosuch-runtime ]] || fail "2. odd-predictor-00001 records runtime '$chosen'"
host="$(get isvc/odd '{.status.url}')"
code="$(curl -sS -m 120 -o "$dir/answer.json" -w '%{http_code}' -H "Host: ${host#*://}" -H 'Content-Type: application/json' \
  "http://$router/v2/models/odd/infer" -d "$body")" || fail "2. the infer of odd failed"
[[ "$code" == 200 && "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["outputs"][0]["data"])' <"$dir/answer.json")" == "[6.5, 14.5]" ]] ||
  fail "2. odd answered $code: $(cat "$dir/answer.json")"
pass "2. a ServingRuntime for nosuchformat appeared: odd Ready on $chosen in $((SECONDS - start)) s, and its infer from zero answered [6.5, 14.5]"

# --- 3. deletion ---------------------------------------------------------------------------------------
k -n "$ns" delete isvc sum odd --wait=true >/dev/null
wait_until "sum's children gone" none_left sum
wait_until "odd's children gone" none_left odd
pass "3. deleting sum and odd removed their children"

# --- 4. KServe's default runtimes and the sklearn-iris sample's shorthand ------------------------------
k delete clusterservingruntime skiff-v2-test-runtime >/dev/null
apply_with_image "$root/deploy/runtimes" kserve/sklearnserver skiff-sklearnserver
wait_until "kserve-sklearnserver listed" k get clusterservingruntime kserve-sklearnserver
"$runtimes_python" "$root/tests/fixtures/sklearn_iris.py" "$dir/models/sklearn-iris"
k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: sklearn-iris, namespace: $ns}
spec:
  predictor:
    minReplicas: 0
    sklearn:
      storageUri: file://$dir/models/sklearn-iris
EOF
wait_until "sklearn-iris Ready" ready sklearn-iris
rev=sklearn-iris-predictor-00001
chosen="$(get "deployment/$rev" '{.metadata.annotations.skiff\.dev/runtime}')"
[[ "$chosen" == ClusterServingRuntime/kserve-sklearnserver ]] || fail "4. $rev records runtime '$chosen'"
containers="$(get "deployment/$rev" '{range .spec.template.spec.containers[*]}{.name}={.image} {end}')"
[[ "$containers" == *"kserve-container=$(image_of skiff-sklearnserver)"*"queue-proxy="* ]] || fail "4. $rev runs $containers"
pass "4. sklearn-iris (predictor.sklearn:) Ready on $chosen among KServe's defaults: $containers"

input='{"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}'
expected="$("$runtimes_python" "$root/tests/fixtures/sklearn_iris.py" "$dir/models/sklearn-iris" --predict <<<"$input")"
host="$(get isvc/sklearn-iris '{.status.url}')"
start=$SECONDS
code="$(curl -sS -m 180 -o "$dir/answer.json" -w '%{http_code}' -H "Host: ${host#*://}" -H 'Content-Type: application/json' \
  "http://$router/v1/models/sklearn-iris:predict" -d "$input")" || fail "4. the predict through $router failed"
[[ "$code" == 200 ]] || fail "4. the predict answered $code: $(cat "$dir/answer.json")"
got="$(python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["predictions"]))' <"$dir/answer.json")"
[[ "$got" == "$expected" ]] || fail "4. sklearn-iris predicted $got, scikit-learn $expected"
pass "4. the V1 predict through the router scaled sklearn-iris from zero in $((SECONDS - start)) s and answered $got, as scikit-learn does"
# KServe's v2 variant (protocolVersion v2) goes to kserve-mlserver (priority 2), as on KServe, with the
# variables KServe's defaulting gives MLServer; at zero, nothing starts (no image of it on the node).
k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: sklearn-irisv2, namespace: $ns}
spec:
  predictor:
    minReplicas: 0
    sklearn:
      protocolVersion: v2
      storageUri: file://$dir/models/sklearn-iris
EOF
rev=sklearn-irisv2-predictor-00001
wait_until "$rev's Deployment" k -n "$ns" get deployment "$rev"
chosen="$(get "deployment/$rev" '{.metadata.annotations.skiff\.dev/runtime}')"
env="$(get "deployment/$rev" '{range .spec.template.spec.containers[0].env[*]}{.name}={.value} {end}')"
[[ "$chosen" == ClusterServingRuntime/kserve-mlserver && "$env" == *"MLSERVER_MODEL_IMPLEMENTATION=mlserver_sklearn.SKLearnModel"* &&
  "$env" == *"MLSERVER_MODEL_NAME=sklearn-irisv2"* && "$env" == *"MLSERVER_MODEL_URI=/mnt/models"* ]] ||
  fail "4. $rev records runtime '$chosen' with env $env"
pass "4. sklearn-irisv2 (protocolVersion v2) gets $chosen with $env"
k -n "$ns" delete isvc sklearn-iris sklearn-irisv2 --wait=true >/dev/null
wait_until "sklearn-iris's children gone" none_left sklearn-iris
wait_until "sklearn-irisv2's children gone" none_left sklearn-irisv2

# --- 5. an LLM on llama.cpp's runtime, from zero, through a router pod by the body's model --------
# --- 6. each event reaches the client when the server writes it (lockstep, a custom container) -----
# The Rust client (cli/tests/openai_cluster.rs), one test at a time; --workspace resolves features as
# scripts/test.sh's `cargo test --workspace` did, so nothing is rebuilt there.
events="$dir/lockstep-events"
openai_test() { # test name
  if [[ -z "${ORT_DYLIB_PATH:-}" && -f "$root/.ort/env" ]]; then
    # shellcheck source=/dev/null
    source "$root/.ort/env"
  fi
  (
    cd "$root"
    SKIFF_OPENAI_ROUTER="$router" SKIFF_OPENAI_EVENTS_DIR="$events" \
      cargo test --quiet --workspace --test openai_cluster -- --ignored --exact "$1" --nocapture 2>&1 | sed 's/^/    /'
    exit "${PIPESTATUS[0]}"
  )
}
apply_with_image "$root/examples/runtimes/llama-cpp-server.yaml" ghcr.io/abetlen/llama-cpp-python skiff-llama-cpp-python
mkdir -p "$dir/models/llama" "$events"
cp "$llm_model" "$dir/models/llama/model.gguf"
# The lockstep container (uid 65532) writes its handshake files where the client reads them.
chown 65532:65532 "$events"
k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llama
  namespace: $ns
  annotations: {serving.knative.dev/progress-deadline: 5m}
spec:
  predictor:
    minReplicas: 0
    maxReplicas: 1
    containerConcurrency: 2
    model:
      modelFormat: {name: gguf}
      storageUri: file://$dir/models/llama
      args: [--n_threads=1, --n_ctx=512]
      resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}
EOF
python3 - "$ns" "$py_image" "$root/tests/fixtures/lockstep_sse.py" "$events" <<'PY' | k apply -f - >/dev/null
import json, sys
ns, image, script, events = sys.argv[1:5]
print(json.dumps({
    "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
    "metadata": {"name": "lockstep", "namespace": ns},
    "spec": {"predictor": {
        "minReplicas": 0, "maxReplicas": 1,
        "containers": [{
            "name": "kserve-container", "image": image,
            "args": ["-c", open(script).read(), "lockstep"],
            "env": [{"name": "EVENTS_DIR", "value": "/events"}, {"name": "TOKENS", "value": "4"},
                    {"name": "HOST", "value": "0.0.0.0"}, {"name": "PORT", "value": "8080"}],
            "ports": [{"containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "/health", "port": 8080}},
            "volumeMounts": [{"name": "events", "mountPath": "/events"}],
        }],
        "volumes": [{"name": "events", "hostPath": {"path": events, "type": "Directory"}}],
    }},
}))
PY
wait_until "llama Ready" ready llama
wait_until "lockstep Ready" ready lockstep
rev=llama-predictor-00001
chosen="$(get "deployment/$rev" '{.metadata.annotations.skiff\.dev/runtime}')"
containers="$(get "deployment/$rev" '{range .spec.template.spec.containers[*]}{.name}={.image} {end}')"
[[ "$chosen" == ClusterServingRuntime/llama-cpp-server && "$containers" == *"kserve-container=$(image_of skiff-llama-cpp-python)"*"queue-proxy="* ]] ||
  fail "5. $rev records runtime '$chosen' and runs $containers"
[[ "$(pods llama)" == 0 && "$(pods lockstep)" == 0 ]] || fail "5. llama or lockstep has pods before any request"
pass "5. llama (gguf) Ready with 0 pods on $chosen: $containers; lockstep (custom container) Ready with 0 pods"

start=$SECONDS
openai_test llama_at_zero_is_listed_and_streams_from_zero_through_a_router_pod ||
  fail "5. llama through the router pod $router (cli/tests/openai_cluster.rs)"
(($(pods llama) >= 1)) || fail "5. no pod of llama after its stream"
pass "5. GET /openai/v1/models through the router lists llama; a streamed chat completion naming it scaled it from zero and streamed to [DONE] in $((SECONDS - start)) s"

start=$SECONDS
openai_test each_event_reaches_the_client_before_the_server_writes_the_next_through_router_activator_and_queue_proxy ||
  fail "6. lockstep through the router pod $router (cli/tests/openai_cluster.rs)"
(($(pods lockstep) >= 1)) || fail "6. no pod of lockstep after its stream"
pass "6. lockstep from zero: each of its 5 events reached the client before the server wrote the next, through router, activator and queue-proxy ($((SECONDS - start)) s)"

start=$SECONDS
wait_until "llama back at zero pods" at_zero llama
pass "5. idle, llama went back to zero pods ($((SECONDS - start)) s after the lockstep check)"
start=$SECONDS
openai_test ten_llama_streams_sent_at_zero_all_complete || fail "5. ten streams at zero through the router pod $router"
pass "5. ten streams sent to llama at zero all completed in $((SECONDS - start)) s"

passed=1
log "PASS: every check passed in $((SECONDS - t0)) s"
