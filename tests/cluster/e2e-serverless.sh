#!/usr/bin/env bash
# End-to-end test of Skiff's serverless behaviour on a local cluster (scripts/local-cluster.sh up:
# the real control plane of tests/cluster and the real node, the kubelet and containerd running
# Skiff's images built from deploy/docker/, kube-proxy and CoreDNS; deploy/base with the local
# images, every Skiff component running as a pod with its in-cluster config).
#
#   tests/cluster/e2e-serverless.sh     # build, local-cluster up, checks, figures, local-cluster down
#
# Every request goes through a router pod (IP:8080, so that f can kill one) with the Host of the
# InferenceService's status.url. The autoscaler settings are short ({"stable-window": "6s",
# "scale-to-zero-grace-period": "2s", initial scale 0}, set live in inferenceservice-config).
#   a. scale from zero: iris (minReplicas 0, maxReplicas 6, containerConcurrency 4) is Ready with no
#      pod; the first V2 infer answers label 1 (cold-start time printed); its Deployment then has >= 1
#   b. scale to zero: idle, the Deployment goes to 0 replicas and 0 pods within window + grace + margin
#   c. scale out: 300 requests at once from zero all answer 200 with their own id; the replicas rise
#      to the decider's answer, ceil(300 / (4 x 0.7)) capped at maxReplicas = 6
#   d. canary: a new storageUri with canaryTrafficPercent 25 -> traffic 75/25 in the status, and
#      25 +- 5 % of 1000 requests answered by the new revision (x-skiff-revision); then roll back
#      (canaryTrafficPercent 0 -> 100 % previous) and promote (no canaryTrafficPercent -> 100 % new),
#      each checked in the status and on a sample of requests.
#   e. custom container: predictor `containers: [{image: skiff-python, ...}]` at minReplicas 0 gets the
#      queue-proxy sidecar, and its first request through the router answers 200 from zero
#   h. transformer and explainer: pipe (iris at minReplicas 0, a transformer and an explainer: image
#      skiff-python running tests/fixtures/component.py, minReplicas 0) gets revisions of its own per component (pipe-predictor-00001,
#      pipe-transformer-00001, label component=transformer), TransformerReady and Ready with no pod;
#      the first V2 infer to the service's host goes router -> transformer (from zero) -> its
#      --predictor_host, the router's cluster DNS name and /serving/e2e/pipe-predictor path ->
#      predictor (from zero) and
#      answers label 1 with the transformer's mark; the predictor's own path answers without it;
#      /v2/models/pipe/explain goes to the explainer (from zero, ExplainerReady), which asks the
#      predictor; idle, the three revisions go back to zero; deleting pipe removes every component's
#      children.
#   k. collocation: colo (iris at minReplicas 0 with a transformer-container beside model, KServe's
#      0.15+ form, `--predictor_host=localhost:8085`) gets no transformer component; its first V2
#      infer goes router -> the pod's queue-proxy -> the transformer -> skiff-server on localhost:8085
#      in the same pod (kserve-container, transformer-container, queue-proxy), from zero, label 1;
#      idle, it goes back to zero
#   i. KServe's own clients (the kserve package; tests/conformance/kserve_clients.py) through a router
#      pod: flower (iris, protocolVersion grpc-v2, minReplicas 0) is Ready with no pod; the first
#      gRPC call (h2c router -> activator -> replica) scales it from zero; all six gRPC methods, typed
#      and raw contents, and REST with binary tensors, every output checked against ONNX Runtime
#   j. logger: logged (iris, minReplicas 0, predictor.logger to a sink on the host at the node's
#      address) answers two requests from zero; the sink gets a request and a response
#      CloudEvent for each (binary mode: ce-specversion, ce-id paired, ce-type, ce-source,
#      ce-inferenceservicename, ce-namespace, ce-component, ce-revision, content-type; the bodies
#      are the request sent and the answer received)
#   f. no loss: load.py soak (8 workers over both router pods, retrying only refused connections)
#      while iris scales out from zero, rolls a new revision, loses an activator pod's process to
#      SIGKILL and a router pod's process to SIGKILL (the container's host pid, from containerd); every failed request is listed with its reason
#   l. kept revisions and rollback (after f, where iris-predictor-00003 took over): the revisions
#      without traffic (00001, 00002) keep their Deployments, labelled skiff.dev/routing-state=reserve
#      at spec.replicas 0; restoring 00002's storageUri routes 100 % back to iris-predictor-00002 with
#      no new Deployment (latestRolledoutRevision 00002, previousRolledoutRevision 00003) and 100 of
#      100 requests answer from it (from zero); canaryTrafficPercent 0 then changes nothing and
#      PredictorReady's message says so; a fourth storageUri rolls 00004, and 00001, the oldest past
#      the two kept, is collected
#   g. deletion: `kubectl delete isvc` removes every child and the router answers 404 for the host
# Exit status 0 only if every check passed; `local-cluster.sh down` runs on every exit (state and
# logs kept on failure, with the tails of the Skiff pods' logs printed).
#
# Environment: SKIFF_E2E_NO_BUILD=1 skips `cargo build --workspace`; SKIFF_E2E_TIMEOUT (seconds per
# wait, 120); SKIFF_LOCAL_PROFILE (debug: what the build makes); the local-cluster variables
# (SKIFF_CLUSTER_DIR defaults to /tmp/skiff-e2e-serverless, ports to 6843/2779/10657/10659).
set -euo pipefail

e2e_name=e2e-serverless
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-serverless}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-6843}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2779}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10657}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10659}"
export SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
# Custom containers (e, h, k): Debian's python3 (tests/cluster/images.sh).
py_image="localhost/skiff-python:$SKIFF_LOCAL_TAG"
ns=e2e
stable_window_s=6
grace_s=2
max_replicas=6
cc=4

# --- build ---------------------------------------------------------------------------------------
e2e_build
command -v python3 >/dev/null || fail "python3 is needed (the load client, tests/cluster/load.py)"
e2e_need_root "a node needs root (containerd, the kubelet, iptables)"

work="$(mktemp -d /tmp/skiff-e2e-serverless.XXXXXX)"
cluster_started=0
passed=0
bg_pids=()
cleanup() {
  local rc=$?
  set +e
  for pid in "${bg_pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  done
  if ((cluster_started)); then
    if ((passed)); then
      "$root/scripts/local-cluster.sh" down >/dev/null || rc=1
    else
      e2e_log_tails skiff-system "$ns"
      KEEP_STATE=1 "$root/scripts/local-cluster.sh" down
      echo "state and logs kept in $dir"
    fi
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- cluster -------------------------------------------------------------------------------------
log "scripts/local-cluster.sh up"
cluster_started=1
"$root/scripts/local-cluster.sh" up 2>&1 | sed 's/^/    /'
export KUBECONFIG="$dir/admin.kubeconfig"

routers=()
ready_routers() {
  mapfile -t routers < <(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-router -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 == "True" && $1 != "" {print $1 ":8080"}' | sort)
  ((${#routers[@]} >= 2))
}
wait_until "two Ready router pods" ready_routers
router="${routers[0]}"
pass "Skiff is up: router pods ${routers[*]}"

# Short autoscaler windows, read live by the autoscaler; initial scale 0 for new revisions.
autoscaler_json="{\"stable-window\":\"${stable_window_s}s\",\"scale-to-zero-grace-period\":\"${grace_s}s\",\"allow-zero-initial-scale\":\"true\",\"initial-scale\":\"0\"}"
e2e_set_autoscaler "$autoscaler_json"
# The autoscaler picks a ConfigMap change up through its watch, a moment later than the API write:
# give it that moment before the first revision, whose initial scale comes from it.
sleep 3
pass "inferenceservice-config autoscaler = $autoscaler_json"
k create namespace "$ns" >/dev/null

model="$root/examples/models/iris"
body='{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'

iris() { # storage-uri [extra predictor lines]
  cat <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris
  namespace: $ns
  annotations:
    autoscaling.knative.dev/window: "${stable_window_s}s"
spec:
  predictor:
    minReplicas: 0
    maxReplicas: $max_replicas
    containerConcurrency: $cc
    model:
      modelFormat: {name: onnx}
      protocolVersion: v2
      storageUri: $1
${2:-}
EOF
}
isvc_get() { k -n "$ns" get isvc "$1" -o jsonpath="$2"; }
isvc_ready() { [[ "$(isvc_get "$1" '{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
url_host() { local u; u="$(isvc_get "$1" '{.status.url}')"; u="${u#*://}"; echo "${u%%/*}"; }
traffic() { isvc_get iris '{range .status.components.predictor.traffic[*]}{.revisionName}={.percent}/{.tag}{" "}{end}'; }
traffic_is() { [[ "$(traffic)" == "$1" ]]; }
# "<spec.replicas> <ready pods>" of a revision's Deployment.
replicas() { k -n "$ns" get deployment "$1" -o jsonpath='{.spec.replicas} {.status.readyReplicas}'; }
spec_replicas() { k -n "$ns" get deployment "$1" -o jsonpath='{.spec.replicas}'; }
pod_count() { # label selector -> number of pods (any phase)
  k -n "$ns" get pods -l "$1" --no-headers 2>/dev/null | wc -l
}
at_zero() { # revision
  [[ "$(spec_replicas "$1")" == 0 && "$(pod_count "skiff.dev/revision-name=$1")" == 0 ]]
}
label_of() { python3 -c 'import json,sys; r=json.load(sys.stdin); print([o for o in r["outputs"] if o["name"]=="label"][0]["data"][0])'; }
# curl through a router (POST with a body, else GET) -> "code time_total_s"; the body goes to $work/answer.
through() { # router host path [body]
  if [[ -n "${4:-}" ]]; then
    curl -sS -m 120 -o "$work/answer" -w '%{http_code} %{time_total}' -H "Host: $2" -H 'Content-Type: application/json' \
      "http://$1$3" -d "$4"
  else
    curl -sS -m 120 -o "$work/answer" -w '%{http_code} %{time_total}' -H "Host: $2" "http://$1$3"
  fi
}
ms_of() { awk -v s="$1" 'BEGIN {printf "%d", s * 1000}'; }
# One line about a load.py summary (JSON).
describe() {
  python3 - "$1" <<'PY'
import json, sys
s = json.loads(sys.argv[1])
lat = s["latency_ms"]
print(f'{s["ok"]} ok, {s["failed"]} failed, {s["distinct_ids"]} distinct ids echoed; latency p50 {lat["p50"]} ms, '
      f'p99 {lat["p99"]} ms, max {lat["max"]} ms; {s["wall_s"]} s; x-skiff-revision {s["revisions"]}')
PY
}

# Samples "<ms> <spec.replicas> <ready>" of a Deployment every 0.5 s into a file until killed.
start_sampler() { # deployment file; sets sampler_pid
  (
    while :; do
      echo "$(now_ms) $(replicas "$1" 2>/dev/null || echo '- -')" >>"$2"
      sleep 0.5
    done
  ) &
  sampler_pid=$!
  bg_pids+=("$sampler_pid")
}
stop_sampler() {
  kill "$sampler_pid" 2>/dev/null
  wait "$sampler_pid" 2>/dev/null || true
}
max_of() { awk -v c="$2" '$c ~ /^[0-9]+$/ && $c > m {m = $c} END {print m + 0}' "$1"; }

# --- a. scale from zero ----------------------------------------------------------------------------
part_scale_from_zero() {
  local start_ms out code t
  start_ms="$(now_ms)"
  iris "file://$model" | k apply -f - >/dev/null
  wait_until "iris Ready" isvc_ready iris
  host="$(url_host iris)"
  [[ "$host" == "iris.$ns.example.com" ]] || fail "a. status.url host is '$host'"
  rev1=iris-predictor-00001
  [[ "$(spec_replicas "$rev1")" == 0 ]] || fail "a. $rev1 has spec.replicas $(spec_replicas "$rev1"), not 0 (initial scale 0)"
  [[ "$(pod_count serving.kserve.io/inferenceservice=iris)" == 0 ]] || fail "a. iris has pods before any request"
  pass "a. iris Ready in $(secs $(($(now_ms) - start_ms))) s with 0 replicas and 0 pods (host $host)"

  out="$(through "$router" "$host" /v2/models/iris/infer "$body")" || fail "a. the first request through $router failed: $out"
  read -r code t <<<"$out"
  [[ "$code" == 200 ]] || fail "a. the first request answered $code: $(head -c 300 "$work/answer")"
  [[ "$(label_of <"$work/answer")" == 1 ]] || fail "a. the first request answered $(head -c 300 "$work/answer"), not label 1"
  local n
  n="$(spec_replicas "$rev1")"
  ((n >= 1)) || fail "a. after the first request $rev1 has spec.replicas $n"
  pass "a. scale from zero: the first V2 infer through the router answered label 1 in $(ms_of "$t") ms (cold start); $rev1 now has $n replica(s)"
}

# --- b. scale to zero --------------------------------------------------------------------------------
part_scale_to_zero() { # revision
  local bound=$((stable_window_s + grace_s + 40)) start_ms
  start_ms="$(now_ms)"
  wait_for "$1 to scale to zero (0 replicas, 0 pods) within ${bound}s of idleness" "$bound" at_zero "$1"
  pass "b. scale to zero: $1 idle -> 0 replicas and 0 pods in $(secs $(($(now_ms) - start_ms))) s (window ${stable_window_s}s + grace ${grace_s}s; bound ${bound}s)"
}

# --- c. scale out from zero ------------------------------------------------------------------------------
part_scale_out() { # revision (at zero)
  local rev="$1" n=300 samples="$work/replicas-scale-out" summary expected
  expected="$(python3 -c "import math; print(min($max_replicas, math.ceil($n / ($cc * 0.7))))")"
  at_zero "$rev" || fail "$rev is not at zero before the burst"
  : >"$samples"
  start_sampler "$rev" "$samples"
  summary="$(python3 "$root/tests/cluster/load.py" burst --router "$router" --host "$host" -n "$n" --id-prefix burst)" ||
    { stop_sampler; fail "c. $n requests at once from zero: $(describe "$summary"); failures: $summary"; }
  sleep 3
  stop_sampler
  python3 - "$summary" "$n" <<'PY' || fail "c. $n requests at once from zero: $summary"
import json, sys
s, n = json.loads(sys.argv[1]), int(sys.argv[2])
assert s["ok"] == n and s["failed"] == 0, f'{s["ok"]} ok, {s["failed"]} failed: {s["failures"][:5]}'
assert s["distinct_ids"] == n, f'{s["distinct_ids"]} distinct ids echoed for {n} requests'
PY
  local max_spec max_ready now_spec
  max_spec="$(max_of "$samples" 2)"
  max_ready="$(max_of "$samples" 3)"
  now_spec="$(spec_replicas "$rev")"
  log "     $(describe "$summary")"
  log "     replicas of $rev: max spec.replicas seen $max_spec, max ready $max_ready, spec.replicas now $now_spec (decider: ceil($n/($cc x 0.7)) capped at $max_replicas = $expected)"
  ((max_spec == expected)) || fail "c. $rev rose to $max_spec replicas at most, not the decider's $expected"
  pass "c. scale out: $n requests at once from zero all answered label 1 with their own id; replicas rose to $max_spec"
}

# --- d. canary, rollback, promotion ------------------------------------------------------------------------
revision_share() { # summary revision -> count of answers from it
  python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print(sum(c for r, c in s["revisions"].items() if r == sys.argv[2] or r.endswith("/" + sys.argv[2])))' "$1" "$2"
}
sample() { # n id-prefix -> sets summary (fails on any failed request)
  summary="$(python3 "$root/tests/cluster/load.py" burst --router "$router" --host "$host" -n "$1" --concurrency 8 --id-prefix "$2")" ||
    fail "d. $1 requests ($2): some failed: $(describe "$summary"); failures: $summary"
}
part_canary() {
  local v2="$work/iris-v2" rev2=iris-predictor-00002 summary new share
  cp -r "$model" "$v2"
  iris "file://$v2" "    canaryTrafficPercent: 25" | k apply -f - >/dev/null
  wait_until "the 75/25 canary split in the status" traffic_is "$rev2=25/latest $rev1=75/prev "
  pass "d. canaryTrafficPercent 25: status traffic $(traffic)"
  sample 1000 canary
  new="$(revision_share "$summary" "$rev2")"
  share=$((new * 100 / 1000))
  log "     1000 requests: $new answered by $rev2 ($share %), $(revision_share "$summary" "$rev1") by $rev1; $(describe "$summary")"
  ((new >= 200 && new <= 300)) || fail "d. the canary got $new of 1000 requests, not 25 +- 5 %"
  pass "d. canary: $share % of 1000 requests on the new revision (25 +- 5 % expected)"

  iris "file://$v2" "    canaryTrafficPercent: 0" | k apply -f - >/dev/null
  wait_until "rollback: 100 % to $rev1" traffic_is "$rev2=0/latest $rev1=100/prev "
  sample 100 rollback
  [[ "$(revision_share "$summary" "$rev1")" == 100 ]] || fail "d. after rollback: $(describe "$summary")"
  pass "d. rollback (canaryTrafficPercent 0): status $(traffic); 100 of 100 requests on $rev1"

  iris "file://$v2" | k apply -f - >/dev/null
  wait_until "promotion: 100 % to $rev2" traffic_is "$rev2=100/latest "
  sample 100 promote
  [[ "$(revision_share "$summary" "$rev2")" == 100 ]] || fail "d. after promotion: $(describe "$summary")"
  pass "d. promotion (canaryTrafficPercent removed): status $(traffic); 100 of 100 requests on $rev2"
  current_rev="$rev2"
}

# --- e. custom container with the queue-proxy sidecar -------------------------------------------------------
part_custom_container() {
  local web_host out code t images
  k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: web
  namespace: $ns
spec:
  predictor:
    minReplicas: 0
    containers:
      - name: kserve-container
        image: $py_image
        args: ["-m", "http.server", "8080", "--bind", "0.0.0.0"]
EOF
  wait_until "web Ready" isvc_ready web
  web_host="$(url_host web)"
  [[ "$(pod_count serving.kserve.io/inferenceservice=web)" == 0 ]] || fail "e. web has pods before any request"
  out="$(through "$router" "$web_host" /)" || fail "e. the first request to web failed: $out"
  read -r code t <<<"$out"
  [[ "$code" == 200 ]] || fail "e. the first request to web answered $code: $(head -c 300 "$work/answer")"
  images="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=web \
    -o jsonpath='{range .items[0].spec.initContainers[*]}{.name}={.image} {.args}{"\n"}{end}{range .items[0].spec.containers[*]}{.name}={.image} {.args}{"\n"}{end}')"
  grep -q 'skiff-activator.*queue-proxy' <<<"$images" || fail "e. web's pod has no queue-proxy sidecar: $images"
  pass "e. custom container: web ($py_image, minReplicas 0) answered 200 from zero in $(ms_of "$t") ms; its pod runs $(grep -c . <<<"$images") containers: $(awk '{print $1}' <<<"$images" | tr '\n' ' ')"
}

# --- h. transformer: a component with revisions of its own, reaching its predictor through the router ---
# The transformer: KServe's contract (--model_name, --predictor_host, --http_port, PREDICTOR_HOST);
# it forwards each POST to http://<predictor_host><path> and marks the answer. With --role=explainer
# it is the explainer: an explain request asks the predictor's infer.
transformer_py="$(cat "$root/tests/fixtures/component.py")"
part_transformer() {
  local pipe_host out code t predictor_host mark
  python3 - "$ns" "$model" "$transformer_py" "$py_image" <<'PY' | k apply -f - >/dev/null
import json, sys
ns, model, script, image = sys.argv[1:5]
print(json.dumps({
    "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
    "metadata": {"name": "pipe", "namespace": ns},
    "spec": {
        "predictor": {"minReplicas": 0, "model": {"modelFormat": {"name": "onnx"}, "protocolVersion": "v2",
                                                  "storageUri": "file://" + model}},
        "transformer": {"minReplicas": 0, "containers": [{"name": "kserve-container", "image": image,
                                                         "args": ["-c", script]}]},
        "explainer": {"minReplicas": 0, "containers": [{"name": "kserve-container", "image": image,
                                                       "args": ["-c", script, "--role=explainer"]}]},
    },
}))
PY
  wait_until "pipe Ready" isvc_ready pipe
  [[ "$(isvc_get pipe '{.status.conditions[?(@.type=="TransformerReady")].status}')" == True ]] ||
    fail "h. pipe is Ready without TransformerReady True"
  [[ "$(isvc_get pipe '{.status.conditions[?(@.type=="ExplainerReady")].status}')" == True ]] ||
    fail "h. pipe is Ready without ExplainerReady True"
  [[ "$(isvc_get pipe '{.status.components.transformer.traffic[0].revisionName}')" == pipe-transformer-00001 ]] ||
    fail "h. status.components.transformer: $(isvc_get pipe '{.status.components.transformer}')"
  [[ "$(k -n "$ns" get deployment pipe-transformer-00001 -o jsonpath='{.metadata.labels.component}')" == transformer ]] ||
    fail "h. pipe-transformer-00001 has no component=transformer label"
  [[ "$(pod_count serving.kserve.io/inferenceservice=pipe)" == 0 ]] || fail "h. pipe has pods before any request"
  pass "h. pipe Ready (TransformerReady, ExplainerReady True) with revisions pipe-predictor-00001, pipe-transformer-00001 and pipe-explainer-00001 and no pod"

  pipe_host="$(url_host pipe)"
  out="$(through "$router" "$pipe_host" /v2/models/pipe/infer "$body")" || fail "h. the first request to pipe failed: $out"
  read -r code t <<<"$out"
  [[ "$code" == 200 ]] || fail "h. the first request to pipe answered $code: $(head -c 300 "$work/answer")"
  [[ "$(label_of <"$work/answer")" == 1 ]] || fail "h. pipe answered $(head -c 300 "$work/answer"), not label 1"
  predictor_host="skiff-router.skiff-system.svc.cluster.local/serving/$ns/pipe-predictor"
  mark="$(python3 -c 'import json,sys; t=json.load(sys.stdin)["transformer"]; print(t["model_name"], t["predictor_host"], t["env"])' <"$work/answer")" ||
    fail "h. the answer has no transformer mark: $(head -c 300 "$work/answer")"
  [[ "$mark" == "pipe $predictor_host $predictor_host" ]] || fail "h. the transformer got '$mark', not 'pipe $predictor_host $predictor_host'"
  (($(spec_replicas pipe-transformer-00001) >= 1 && $(spec_replicas pipe-predictor-00001) >= 1)) ||
    fail "h. after the request: transformer $(spec_replicas pipe-transformer-00001), predictor $(spec_replicas pipe-predictor-00001) replicas"
  pass "h. transformer: the first V2 infer went router -> pipe-transformer-00001 -> $predictor_host -> pipe-predictor-00001, both from zero, label 1 in $(ms_of "$t") ms (--model_name pipe, --predictor_host and PREDICTOR_HOST $predictor_host)"

  out="$(through "$router" "$router" "/serving/$ns/pipe-predictor/v2/models/pipe/infer" "$body")" || fail "h. the predictor's path failed: $out"
  [[ "${out%% *}" == 200 && "$(label_of <"$work/answer")" == 1 ]] || fail "h. the predictor's path answered $out: $(head -c 300 "$work/answer")"
  ! grep -q '"transformer"' "$work/answer" || fail "h. the predictor's own path went through the transformer"
  pass "h. /serving/$ns/pipe-predictor reaches the predictor alone"

  out="$(through "$router" "$pipe_host" /v2/models/pipe/explain "$body")" || fail "h. the first explain to pipe failed: $out"
  read -r code t <<<"$out"
  [[ "$code" == 200 && "$(label_of <"$work/answer")" == 1 ]] || fail "h. explain answered $code: $(head -c 300 "$work/answer")"
  mark="$(python3 -c 'import json,sys; a=json.load(sys.stdin); print(a["explainer"]["predictor_host"], "transformer" in a)' <"$work/answer")" ||
    fail "h. the explain answer has no explainer mark: $(head -c 300 "$work/answer")"
  [[ "$mark" == "$predictor_host False" ]] || fail "h. the explainer got '$mark', not '$predictor_host False'"
  pass "h. explainer: /v2/models/pipe/explain went router -> pipe-explainer-00001 (from zero) -> $predictor_host -> pipe-predictor-00001, not through the transformer, in $(ms_of "$t") ms"

  local bound=$((stable_window_s + grace_s + 40)) start_ms
  start_ms="$(now_ms)"
  both_at_zero() { at_zero pipe-transformer-00001 && at_zero pipe-explainer-00001 && at_zero pipe-predictor-00001; }
  wait_for "pipe's transformer and predictor revisions to scale to zero within ${bound}s" "$bound" both_at_zero
  pass "h. idle: pipe-transformer-00001, pipe-explainer-00001 and pipe-predictor-00001 each back at 0 replicas and 0 pods in $(secs $(($(now_ms) - start_ms))) s"

  k -n "$ns" delete isvc pipe --wait=true --timeout="${timeout}s" >/dev/null
  pipe_gone() { [[ -z "$(k -n "$ns" get deployments,services,pods -l serving.kserve.io/inferenceservice=pipe -o name)" ]]; }
  wait_until "every child of pipe to go" pipe_gone
  pass "h. kubectl delete isvc pipe: every component's Deployments, Services and pods gone"
}

# --- k. collocation: the transformer in the model's pod, calling skiff-server on localhost:8085 ----------
part_collocation() {
  local chost out code t mark containers
  python3 - "$ns" "$model" "$transformer_py" "$py_image" <<'PY' | k apply -f - >/dev/null
import json, sys
ns, model, script, image = sys.argv[1:5]
print(json.dumps({
    "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
    "metadata": {"name": "colo", "namespace": ns},
    "spec": {"predictor": {
        "minReplicas": 0,
        "model": {"modelFormat": {"name": "onnx"}, "protocolVersion": "v2", "storageUri": "file://" + model},
        "containers": [{"name": "transformer-container", "image": image,
                        "args": ["-c", script, "--model_name=colo", "--predictor_host=localhost:8085",
                                 "--http_port=8080"]}],
    }},
}))
PY
  wait_until "colo Ready" isvc_ready colo
  [[ -z "$(k -n "$ns" get deployments -l serving.kserve.io/inferenceservice=colo,component=transformer -o name)" ]] ||
    fail "k. collocation made a transformer component of its own"
  [[ "$(pod_count serving.kserve.io/inferenceservice=colo)" == 0 ]] || fail "k. colo has pods before any request"
  chost="$(url_host colo)"
  out="$(through "$router" "$chost" /v2/models/colo/infer "$body")" || fail "k. the first request to colo failed: $out"
  read -r code t <<<"$out"
  [[ "$code" == 200 ]] || fail "k. the first request to colo answered $code: $(head -c 300 "$work/answer")"
  [[ "$(label_of <"$work/answer")" == 1 ]] || fail "k. colo answered $(head -c 300 "$work/answer"), not label 1"
  mark="$(python3 -c 'import json,sys; t=json.load(sys.stdin)["transformer"]; print(t["model_name"], t["predictor_host"])' <"$work/answer")" ||
    fail "k. the answer has no transformer mark: $(head -c 300 "$work/answer")"
  [[ "$mark" == "colo localhost:8085" ]] || fail "k. the transformer got '$mark', not 'colo localhost:8085'"
  containers="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=colo -o jsonpath='{.items[0].spec.containers[*].name}')"
  [[ "$containers" == "kserve-container transformer-container queue-proxy" ]] ||
    fail "k. colo's pod runs '$containers', not kserve-container transformer-container queue-proxy"
  pass "k. collocation: the first V2 infer to colo went router -> queue-proxy -> transformer-container -> skiff-server on localhost:8085 in one pod ($containers), from zero, label 1 in $(ms_of "$t") ms"
  local bound=$((stable_window_s + grace_s + 40))
  wait_for "colo-predictor-00001 to scale to zero within ${bound}s" "$bound" at_zero colo-predictor-00001
  k -n "$ns" delete isvc colo --wait=true --timeout="${timeout}s" >/dev/null
  pass "k. idle, colo-predictor-00001 back at 0 replicas; colo deleted"
}

# --- i. KServe's gRPC and REST clients through the router, from zero ------------------------------------------
part_kserve_clients() {
  local python="$root/.bench/kserve-venv/bin/python" fhost out start_ms
  [[ -x "$python" ]] || fail "i. $python is missing: run PEERS=kserve bench/peers/setup.sh (scripts/test.sh does)"
  k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: flower
  namespace: $ns
spec:
  predictor:
    minReplicas: 0
    model:
      modelFormat: {name: onnx}
      protocolVersion: grpc-v2
      storageUri: file://$model
EOF
  wait_until "flower Ready" isvc_ready flower
  [[ "$(pod_count serving.kserve.io/inferenceservice=flower)" == 0 ]] || fail "i. flower has pods before any call"
  fhost="$(url_host flower)"
  start_ms="$(now_ms)"
  out="$("$python" "$root/tests/conformance/kserve_clients.py" --rest "http://$router" --grpc "$router" \
    --host "$fhost" --only iris --served-as iris=flower --models "$(dirname "$model")" 2>&1)" ||
    fail "i. KServe's clients through $router: $(tail -n 25 <<<"$out")"
  grep -q "ok   gRPC ModelInfer iris (raw contents): probabilities matches ONNX Runtime" <<<"$out" ||
    fail "i. no raw-contents gRPC inference in: $(tail -n 25 <<<"$out")"
  grep -q "ok   REST iris (binary_data=True): answered in binary" <<<"$out" ||
    fail "i. no binary REST inference in: $(tail -n 25 <<<"$out")"
  pass "i. KServe's InferenceGRPCClient (six methods, typed and raw) and InferenceRESTClient (binary_data) through the router, from zero, in $(secs $(($(now_ms) - start_ms))) s; $(grep -c '^ok' <<<"$out") checks against ONNX Runtime"
  k -n "$ns" delete isvc flower --wait=true --timeout="${timeout}s" >/dev/null
}

# --- j. the request logger: CloudEvents to a sink on the host ------------------------------------------------
part_logger() {
  local gateway sink_port events="$work/events.jsonl" lhost out code
  gateway="$(e2e_node_ip)"
  python3 - "$gateway" "$events" "$work/sink-port" <<'PY' &
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(sys.argv[2], "a") as out:
            out.write(json.dumps({"headers": {k.lower(): v for k, v in self.headers.items()},
                                  "body": body.decode()}) + "\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer((sys.argv[1], 0), Sink)
open(sys.argv[3], "w").write(str(server.server_address[1]))
server.serve_forever()
PY
  bg_pids+=($!)
  wait_until "the CloudEvents sink to listen" test -s "$work/sink-port"
  sink_port="$(cat "$work/sink-port")"
  iris "file://$model" "    logger: {url: \"http://$gateway:$sink_port/events\", mode: all}" |
    sed 's/^  name: iris$/  name: logged/' | k apply -f - >/dev/null
  wait_until "logged Ready" isvc_ready logged
  lhost="$(url_host logged)"
  for id in first second; do
    out="$(through "$router" "$lhost" /v2/models/logged/infer "{\"id\":\"$id\",${body#\{}")" || fail "j. request $id failed: $out"
    code="${out%% *}"
    [[ "$code" == 200 ]] || fail "j. request $id answered $code: $(head -c 300 "$work/answer")"
  done
  has_four() { [[ -f "$events" && "$(wc -l <"$events")" -ge 4 ]]; }
  wait_for "four CloudEvents at the sink" 30 has_four
  sleep 1
  python3 - "$events" "$ns" <<'PY' || fail "j. the CloudEvents are not what KServe sends: $(cat "$events")"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
ns = sys.argv[2]
assert len(events) == 4, f"{len(events)} events"
by_id = {}
for event in events:
    h, body = event["headers"], json.loads(event["body"])
    assert h["ce-specversion"] == "1.0", h
    assert h["ce-source"] == f"http://logged-predictor.{ns}", h
    assert h["ce-inferenceservicename"] == "logged", h
    assert h["ce-namespace"] == ns, h
    assert h["ce-component"] == "predictor", h
    assert h["ce-revision"] == "logged-predictor-00001", h
    assert h["content-type"] == "application/json", h
    kind = h["ce-type"]
    if kind == "org.kubeflow.serving.inference.request":
        assert body["inputs"][0]["name"] == "input", body
    elif kind == "org.kubeflow.serving.inference.response":
        assert body["model_name"] == "logged" and body["outputs"], body
    else:
        raise AssertionError(f"ce-type {kind}")
    by_id.setdefault(h["ce-id"], []).append(kind)
assert sorted(by_id) == ["first", "second"], by_id
assert all(sorted(kinds) == ["org.kubeflow.serving.inference.request", "org.kubeflow.serving.inference.response"]
           for kinds in by_id.values()), by_id
PY
  pass "j. logger: two requests to logged (from zero) gave the sink at $gateway:$sink_port a request and a response CloudEvent each, ce-id = the V2 id, with KServe's attributes and the bodies"
  k -n "$ns" delete isvc logged --wait=true --timeout="${timeout}s" >/dev/null
}

# --- f. no loss under scale-out, rollout, SIGKILLed activator and router -------------------------------------
restarts() { k -n "$1" get pod "$2" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
pod_ready() { [[ "$(k -n "$1" get pod "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
restarted() { # namespace pod restarts-before
  [[ "$(restarts "$1" "$2")" -gt "$3" ]] && pod_ready "$1" "$2"
}
sigkill_pod() { # namespace pod -> kills its container's process, waits for the restart
  local pids before
  pids="$(e2e_container_pid "$1" "$2")"
  [[ -n "${pids// /}" ]] || fail "f. containerd knows no process of pod $1/$2"
  before="$(restarts "$1" "$2")"
  # shellcheck disable=SC2086 # one word per pid
  kill -KILL $pids
  echo "$(now_ms) $1/$2 pids $pids" >>"$work/kills"
  wait_until "pod $1/$2 to be restarted and Ready after SIGKILL" restarted "$1" "$2" "$before"
}
part_no_loss() {
  local stop="$work/soak.stop" out="$work/soak.json" soak_pid samples="$work/replicas-soak" rev3=iris-predictor-00003
  local activator router_pod router_ip summary
  wait_for "$current_rev to be at zero before the soak" $((stable_window_s + grace_s + 40)) at_zero "$current_rev"
  : >"$samples"
  : >"$work/kills"
  start_sampler "$current_rev" "$samples"
  python3 "$root/tests/cluster/load.py" soak --router "$(
    IFS=,
    echo "${routers[*]}"
  )" --host "$host" --workers 8 --stop-file "$stop" --max-seconds 400 --id-prefix soak >"$out" &
  soak_pid=$!
  bg_pids+=("$soak_pid")
  log "     soak: 8 workers over ${routers[*]} (pid $soak_pid)"

  # Scale-out from zero under the load.
  more_than_one() { (($(max_of "$samples" 3) >= 2)); }
  wait_until "$current_rev to scale out under the soak (>= 2 ready)" more_than_one
  pass "f. under load $current_rev scaled out from zero to $(max_of "$samples" 3) ready replicas"
  stop_sampler

  # A rollout: revision 3 takes all traffic (from zero, through the activator).
  cp -r "$model" "$work/iris-v3"
  iris "file://$work/iris-v3" | k apply -f - >/dev/null
  wait_until "the rollout to $rev3" traffic_is "$rev3=100/latest "
  rev3_ready() { [[ "$(k -n "$ns" get deployment "$rev3" -o jsonpath='{.status.readyReplicas}')" -ge 1 ]]; }
  wait_until "$rev3 to have a ready pod" rev3_ready
  sleep 3
  pass "f. under load: rolled out $rev3 ($(traffic))"

  # SIGKILL one activator pod's process (the kubelet restarts its container in the same pod).
  activator="$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-activator -o jsonpath='{.items[0].metadata.name}')"
  sigkill_pod skiff-system "$activator"
  sleep 2
  pass "f. under load: SIGKILLed the process of activator pod $activator; it was restarted and is Ready"

  # SIGKILL the process of the router pod that half the workers use; they move to the other one.
  router_ip="${routers[0]%:*}"
  router_pod="$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-router -o jsonpath="{.items[?(@.status.podIP==\"$router_ip\")].metadata.name}")"
  [[ -n "$router_pod" ]] || fail "f. no router pod with IP $router_ip"
  echo "$router_ip:8080" >"$work/killed-router"
  sigkill_pod skiff-system "$router_pod"
  sleep 3
  pass "f. under load: SIGKILLed the process of router pod $router_pod ($router_ip); it was restarted and is Ready"

  touch "$stop"
  wait "$soak_pid" || true
  summary="$(cat "$out")"
  [[ -n "$summary" ]] || fail "f. the soak client printed no summary"
  python3 - "$summary" "$work/kills" "$work/killed-router" <<'PY' || fail "f. requests failed under the soak (above)"
import json, sys
s = json.loads(sys.argv[1])
kills = [l.split() for l in open(sys.argv[2]) if l.strip()]
killed_router = open(sys.argv[3]).read().strip()
router_kill_t = [int(k[0]) / 1000 for k in kills if '/skiff-router-' in k[1]]
print(f'     soak: {s["ok"]} ok, {s["failed"]} failed, {s["distinct_ids"]} distinct ids, {s["refused_retries"]} refused connections retried on the other router')
print(f'     answers per revision {s["revisions"]}, per router {s["routers"]}; latency p50 {s["latency_ms"]["p50"]} ms, p99 {s["latency_ms"]["p99"]} ms, max {s["latency_ms"]["max"]} ms; {s["wall_s"]} s')
for k in kills:
    print(f'     SIGKILL at {int(k[0]) / 1000:.3f}: {k[1]} ({" ".join(k[3:])})')
# A request in flight on the router whose process was SIGKILLed dies with its TCP connection: the
# client sent it and cannot know whether it ran, so it does not retry it (only refused connections).
def in_flight_on_killed_router(f):
    return (f["router"] == killed_router and f["reason"].startswith("no response")
            and any(t - 0.5 <= f["t"] <= t + 2.0 for t in router_kill_t))
explained = [f for f in s["failures"] if in_flight_on_killed_router(f)]
unexplained = [f for f in s["failures"] if not in_flight_on_killed_router(f)]
for f in explained:
    print(f'     lost with the killed router: t={f["t"]:.3f} router={f["router"]} id={f["id"]}: {f["reason"]}')
for f in unexplained:
    print(f'     FAILED: t={f["t"]:.3f} router={f["router"]} id={f["id"]}: {f["reason"]}')
others = s["failed"] - len(explained)  # the client lists at most 50 failures
print(f'     {others} failed otherwise; {len(explained)} were in flight on the router process that was SIGKILLed')
sys.exit(1 if others else 0)
PY
  pass "f. no loss: through scale-out, rollout, an activator SIGKILL and a router SIGKILL, no request failed except those in flight on the killed router process (listed above)"
}

# --- l. kept revisions and rollback -------------------------------------------------------------------------
part_rollback() {
  local rev2=iris-predictor-00002 rev3=iris-predictor-00003 rev4=iris-predictor-00004 summary message
  routing() { k -n "$ns" get deployment "$1" -o jsonpath='{.metadata.labels.skiff\.dev/routing-state} {.spec.replicas}'; }
  reserved() { [[ "$(routing "$1")" == "reserve 0" ]]; }
  wait_until "$rev1 kept at zero (reserve)" reserved "$rev1"
  wait_until "$rev2 kept at zero (reserve)" reserved "$rev2"
  pass "l. without traffic, $rev1 and $rev2 are kept: routing-state reserve, spec.replicas 0 (both)"

  iris "file://$work/iris-v2" | k apply -f - >/dev/null
  wait_until "the rollback to $rev2" traffic_is "$rev2=100/latest "
  [[ -z "$(k -n "$ns" get deployment "$rev4" -o name 2>/dev/null)" ]] || fail "l. restoring $rev2's spec created $rev4"
  local rolled
  rolled="$(isvc_get iris '{.status.components.predictor.latestRolledoutRevision} {.status.components.predictor.previousRolledoutRevision}')"
  [[ "$rolled" == "$rev2 $rev3" ]] || fail "l. after the rollback latest/previous rolled out are '$rolled', not '$rev2 $rev3'"
  sample 100 rollback-kept
  [[ "$(revision_share "$summary" "$rev2")" == 100 ]] || fail "l. after the rollback to $rev2: $(describe "$summary")"
  pass "l. restoring $rev2's storageUri: no new revision, status $(traffic)(rolled out: $rolled), 100 of 100 requests on $rev2"

  iris "file://$work/iris-v2" "    canaryTrafficPercent: 0" | k apply -f - >/dev/null
  said() { message="$(isvc_get iris '{.status.conditions[?(@.type=="PredictorReady")].message}')" && [[ "$message" == *"changes nothing"* ]]; }
  wait_until "PredictorReady to say canaryTrafficPercent 0 changes nothing" said
  traffic_is "$rev2=100/latest " || fail "l. canaryTrafficPercent 0 after a full rollout moved traffic: $(traffic)"
  sample 50 idle-canary
  [[ "$(revision_share "$summary" "$rev2")" == 50 ]] || fail "l. canaryTrafficPercent 0 after a full rollout: $(describe "$summary")"
  pass "l. canaryTrafficPercent 0 after the full rollout: 50 of 50 requests still on $rev2; PredictorReady: $message"

  cp -r "$model" "$work/iris-v4"
  iris "file://$work/iris-v4" | k apply -f - >/dev/null
  wait_until "the rollout to $rev4" traffic_is "$rev4=100/latest "
  gone() { [[ -z "$(k -n "$ns" get deployment "$1" -o name 2>/dev/null)" ]]; }
  wait_until "$rev1, the oldest past the two kept, to be collected" gone "$rev1"
  reserved "$rev2" && reserved "$rev3" || fail "l. $rev2 and $rev3 are not both kept at zero: $(routing "$rev2") / $(routing "$rev3")"
  pass "l. $rev4 rolled out: $rev1 collected, $rev2 and $rev3 kept at zero"
  current_rev="$rev4"
}

# --- g. deletion ---------------------------------------------------------------------------------------------
part_deletion() {
  local out code
  k -n "$ns" delete isvc iris web --wait=true --timeout="${timeout}s" >/dev/null
  no_children() {
    [[ -z "$(k -n "$ns" get deployments,replicasets,services,pods -l 'serving.kserve.io/inferenceservice in (iris,web)' -o name)" ]]
  }
  wait_until "every child of iris and web to go" no_children
  answers_404() {
    out="$(through "$router" "$host" /v2/models/iris/infer "$body")" && [[ "${out%% *}" == 404 ]]
  }
  wait_for "the router to answer 404 for $host" 30 answers_404
  pass "g. kubectl delete isvc: Deployments, ReplicaSets, Services and pods gone; the router answers 404 for $host"
}

part_scale_from_zero
part_scale_to_zero "$rev1"
part_scale_out "$rev1"
part_canary
part_custom_container
part_transformer
part_collocation
part_kserve_clients
part_logger
part_no_loss
part_rollback
part_deletion

passed=1
log "PASS in $((SECONDS - t0)) s"
