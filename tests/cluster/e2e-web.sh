#!/usr/bin/env bash
# End-to-end test of the models web app (skiff-web) on a local cluster, in a real headless Chromium,
# as a non-admin user (scripts/local-cluster.sh up: the real control plane of tests/cluster and the
# real node running Skiff's images, deploy/base with the local images, skiff-web included, auth on).
#
#   tests/cluster/e2e-web.sh     # build, local-cluster up, set-up, browser test, local-cluster down
#
# Set-up: namespaces team-a and team-b; user alice (no groups) gets a Role in team-a only
# (InferenceServices, events, pods, pods/log); InferenceService iris in team-a (minReplicas 1),
# Ready, answering one V2 infer through a router pod; skiff-web exactly as deploy/base has it (auth
# on, USERID_HEADER kubeflow-userid, Secure CSRF cookie: the browser talks to http://127.0.0.1,
# which browsers treat as a secure origin). deploy/base's NetworkPolicies are in place and enforced
# (kube-router), and deploy/model-namespace's is applied in team-a: the app's log stream and its
# metrics from the router pods work through them. Without Secret skiff-web-proxy the app says at start-up that it acts on no user header, and
# refuses `kubeflow-userid: alice` (401 naming APP_PROXY_SECRET); the script then creates the Secret
# and restarts the app, which reads it from the file the Secret is mounted as (APP_PROXY_SECRET_FILE;
# no secret in the Deployment's environment). Then `cargo test -p skiff --test web_cluster -- --ignored`
# (cli/tests/web_cluster.rs) runs against the skiff-web pod's IP:5000 (the host reaches pods through
# the node's bridge), through a proxy in the test that adds `kubeflow-userid: alice`
# and the secret (skiff-proxy-secret):
#   - straight to the app without the header: 401
#   - straight to the app with `kubeflow-userid: alice` but without the secret, or a wrong one: 401
#   - a POST without the CSRF cookie and header (plain client): 403
#   - the app's log stream of iris's running pod (kserve-container) gives a line
#   - in Chromium: the index of team-a lists iris; ?ns=team-b is a 403 saying alice may not list
#     inferenceservices in team-b; fetch() POST from the page without X-XSRF-TOKEN is a 403; with
#     minReplicas -1 the API server's 422 comes back naming the field; with cookie and header it
#     creates iris-from-browser (201), which the live index then shows without a reload; a third,
#     iris-opened-at-once, whose detail page, opened at once, turns Ready: True without a reload
# Afterwards the script checks with kubectl that iris-from-browser exists in team-a and that none of
# the refused ones (nor anything in team-b) does. Screenshots of every page: target/web-screenshots/web_cluster/.
# Exit status 0 only if every check passed; `local-cluster.sh down` runs on every exit (state and
# logs kept on failure, with the tails of the pods' logs printed).
#
# Environment: SKIFF_E2E_NO_BUILD=1 skips `cargo build --workspace` (the test binary is still built
# by cargo test if needed); SKIFF_E2E_TIMEOUT (seconds per wait, 120); SKIFF_LOCAL_PROFILE (debug);
# the local-cluster variables (SKIFF_CLUSTER_DIR defaults to /tmp/skiff-e2e-web, ports to
# 7043/2979/10857/10859). Needs chromium and chromedriver.
set -euo pipefail

e2e_name=e2e-web
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-web}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-7043}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2979}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10857}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10859}"
export SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
ns=team-a
other_ns=team-b
user=alice

# --- build ---------------------------------------------------------------------------------------
e2e_build
e2e_need_root "a node needs root (containerd, the kubelet, iptables)"
for tool in chromium chromedriver; do
  command -v "$tool" >/dev/null || fail "$tool is needed (apt-get install chromium chromium-driver)"
done

work="$(mktemp -d /tmp/skiff-e2e-web.XXXXXX)"
cluster_started=0
passed=0
cleanup() {
  local rc=$?
  set +e
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

# --- namespaces and alice's rights ---------------------------------------------------------------
k create namespace "$ns" >/dev/null
k create namespace "$other_ns" >/dev/null
k apply -f - >/dev/null <<EOF
# What a Kubeflow profile's contributor gets for models, in $ns only.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: models-user
  namespace: $ns
rules:
  - apiGroups: [serving.kserve.io]
    resources: [inferenceservices]
    verbs: [get, list, watch, create, patch, delete]
  - apiGroups: [""]
    resources: [events, pods]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [pods/log]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: models-user-$user
  namespace: $ns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: models-user
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: $user
EOF
can_i() { k auth can-i "$@" --as "$user" 2>/dev/null || true; }
[[ "$(can_i list inferenceservices.serving.kserve.io -n "$ns")" == yes ]] || fail "$user may not list inferenceservices in $ns"
[[ "$(can_i list inferenceservices.serving.kserve.io -n "$other_ns")" == no ]] || fail "$user may list inferenceservices in $other_ns"
[[ "$(can_i list namespaces)" == no ]] || fail "$user may list namespaces"
pass "namespaces $ns and $other_ns; $user may use InferenceServices, events, pods and pods/log in $ns only"

# --- runtimes the create form offers ------------------------------------------------------------
# A ServingRuntime in $ns that auto-selects sklearn, one that does not auto-select xgboost, and a
# disabled ClusterServingRuntime for tensorflow: the form offers onnx and sklearn only.
k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1alpha1
kind: ServingRuntime
metadata:
  name: form-sklearn
  namespace: $ns
spec:
  supportedModelFormats:
    - {name: sklearn, version: "1", autoSelect: true}
    - {name: xgboost, version: "1"}
  protocolVersions: [v1, v2]
  containers:
    - {name: kserve-container, image: kserve/sklearnserver:latest}
---
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: form-tensorflow-disabled
spec:
  disabled: true
  supportedModelFormats:
    - {name: tensorflow, version: "2", autoSelect: true}
  containers:
    - {name: kserve-container, image: tensorflow/serving:2.6.2}
EOF
pass "runtimes for the create form: ServingRuntime form-sklearn in $ns, ClusterServingRuntime form-tensorflow-disabled"

# --- skiff-web: auth on, cookies for plain HTTP --------------------------------------------------
web_env() { k -n skiff-system get deployment skiff-web -o jsonpath="{.spec.template.spec.containers[0].env[?(@.name==\"$1\")].value}"; }
[[ "$(web_env APP_DISABLE_AUTH)" == false ]] || fail "deploy/base has APP_DISABLE_AUTH=$(web_env APP_DISABLE_AUTH), not false"
[[ "$(web_env USERID_HEADER)" == kubeflow-userid ]] || fail "deploy/base has USERID_HEADER=$(web_env USERID_HEADER)"
# APP_SECURE_COOKIES stays true: browsers keep Secure cookies from http://127.0.0.1 (a potentially
# trustworthy origin), which is where the test's proxy listens.
[[ "$(web_env APP_SECURE_COOKIES)" == true ]] || fail "deploy/base has APP_SECURE_COOKIES=$(web_env APP_SECURE_COOKIES)"
web_ip() {
  k -n skiff-system get pods -l app.kubernetes.io/name=skiff-web -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.metadata.deletionTimestamp}{"\n"}{end}' |
    awk '$2 == "True" && $3 == "" && $1 != "" {print $1}' | head -n 1
}
one_web_pod() { [[ "$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-web --no-headers | wc -l)" == 1 && -n "$(web_ip)" ]]; }
wait_until "one Ready skiff-web pod" one_web_pod
web="http://$(web_ip):5000"
code="$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "$web/models/healthz")"
[[ "$code" == 200 ]] || fail "$web/models/healthz answered $code"
pass "skiff-web at $web as deploy/base has it (auth on, USERID_HEADER kubeflow-userid, Secure CSRF cookie); /models/healthz 200"

# --- NetworkPolicies: deploy/base's are in place, the model namespace's applies --------------------
for policy in skiff-router skiff-activator skiff-controller skiff-web; do
  k -n skiff-system get networkpolicy "$policy" -o name >/dev/null || fail "NetworkPolicy $policy is not in skiff-system"
done
k apply -n "$ns" -f "$root/deploy/model-namespace/networkpolicy.yaml" >/dev/null || fail "deploy/model-namespace/networkpolicy.yaml did not apply in $ns"
pass "NetworkPolicies skiff-router, skiff-activator, skiff-controller, skiff-web in skiff-system; skiff-model-pods in $ns"

# --- without the proxy's secret the user header is not believed ------------------------------------
web_log() { k -n skiff-system logs -l app.kubernetes.io/name=skiff-web --tail=-1 2>/dev/null; }
warned() { web_log | grep -q 'APP_PROXY_SECRET is not set'; }
wait_until "skiff-web's start-up warning about APP_PROXY_SECRET" warned
code="$(curl -sS -m 10 -o "$work/answer" -w '%{http_code}' -H "kubeflow-userid: $user" "$web/models/?ns=$ns")"
[[ "$code" == 401 ]] && grep -q 'APP_PROXY_SECRET is not set' "$work/answer" ||
  fail "without Secret skiff-web-proxy, kubeflow-userid: $user answered $code: $(head -c 300 "$work/answer")"
pass "no Secret skiff-web-proxy: the app warned at start-up and answers kubeflow-userid: $user with 401 ($(head -c 160 "$work/answer"))"
proxy_secret="$(head -c 32 /dev/urandom | base64 | tr -d '=+/\n')"
k -n skiff-system create secret generic skiff-web-proxy --from-literal=secret="$proxy_secret" >/dev/null
k -n skiff-system rollout restart deployment/skiff-web >/dev/null
k -n skiff-system rollout status deployment/skiff-web --timeout="${timeout}s" >/dev/null || fail "skiff-web did not roll out"
wait_until "one Ready skiff-web pod after the restart" one_web_pod
web="http://$(web_ip):5000"
code="$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H "kubeflow-userid: $user" -H "skiff-proxy-secret: $proxy_secret" "$web/models/?ns=$ns")"
[[ "$code" == 200 ]] || fail "with the proxy's secret, kubeflow-userid: $user answered $code"
env_names=" $(k -n skiff-system get deployment skiff-web -o jsonpath='{.spec.template.spec.containers[0].env[*].name}') "
[[ "$env_names" != *" APP_PROXY_SECRET "* && "$env_names" == *" APP_PROXY_SECRET_FILE "* ]] ||
  fail "skiff-web's environment should name the secret's file, not hold it:$env_names"
pass "Secret skiff-web-proxy created, skiff-web restarted at $web: with the secret (a mounted file, not an environment variable), $user gets 200"

# --- an InferenceService in team-a ---------------------------------------------------------------
k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris
  namespace: $ns
spec:
  predictor:
    minReplicas: 1
    model:
      modelFormat: {name: onnx}
      protocolVersion: v2
      storageUri: file://$root/examples/models/iris
EOF
isvc_ready() { [[ "$(k -n "$ns" get isvc iris -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
wait_until "iris Ready" isvc_ready
url="$(k -n "$ns" get isvc iris -o jsonpath='{.status.url}')"
host="${url#*://}"
host="${host%%/*}"
router="$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-router -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
  awk '$2 == "True" && $1 != "" {print $1 ":8080"; exit}')"
[[ -n "$router" ]] || fail "no Ready router pod"
# One request through the router (from zero, if the revision were there, this brings a pod up).
body='{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'
code="$(curl -sS -m 120 -o "$work/answer" -w '%{http_code}' -H "Host: $host" -H 'Content-Type: application/json' \
  "http://$router/v2/models/iris/infer" -d "$body")" || fail "the infer request through $router failed"
[[ "$code" == 200 ]] || fail "the infer request through $router answered $code: $(head -c 300 "$work/answer")"
running_pod() {
  k -n "$ns" get pods -l serving.kserve.io/inferenceservice=iris -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -qx Running
}
wait_until "a Running pod of iris" running_pod
pass "iris in $ns is Ready ($url) and answered a V2 infer through router $router"

# --- the browser test ------------------------------------------------------------------------------
log "cargo test -p skiff --test web_cluster -- --ignored --nocapture (app $web, user $user)"
if [[ -z "${ORT_DYLIB_PATH:-}" && -f "$root/.ort/env" ]]; then
  # shellcheck source=/dev/null
  source "$root/.ort/env"
fi
(
  cd "$root"
  SKIFF_WEB_URL="$web" SKIFF_WEB_USER="$user" SKIFF_WEB_NAMESPACE="$ns" SKIFF_WEB_FORBIDDEN_NAMESPACE="$other_ns" \
    SKIFF_WEB_SERVICE=iris SKIFF_WEB_MODEL_URI="file://$root/examples/models/iris" \
    SKIFF_WEB_ROUTER="$router" SKIFF_WEB_HOST="$host" SKIFF_WEB_PROXY_SECRET="$proxy_secret" \
    cargo test --quiet -p skiff --test web_cluster -- --ignored --nocapture 2>&1 | sed 's/^/    /'
  exit "${PIPESTATUS[0]}"
) || fail "the browser test failed (screenshots and failure.html in $root/target/web-screenshots/web_cluster/)"
pass "browser test: user header without the proxy's secret refused, the create form's formats, index, 403 in $other_ns, CSRF refusals, API refusal shown, create, live index, logs, metrics from the router pods"

# --- what the cluster says -------------------------------------------------------------------------
managers="$(k -n "$ns" get isvc iris-from-browser -o jsonpath='{range .metadata.managedFields[*]}{.manager}/{.operation}{" "}{end}')" ||
  fail "iris-from-browser is not in $ns"
for name in iris-no-csrf iris-no-header iris-invalid; do
  [[ -z "$(k -n "$ns" get isvc "$name" --ignore-not-found -o name)" ]] || fail "$name was created although refused"
done
[[ -z "$(k -n "$other_ns" get isvc -o name)" ]] || fail "something was created in $other_ns"
pass "kubectl: iris-from-browser exists in $ns (field managers: ${managers% }); the refused ones do not"
log "screenshots: $(find "$root/target/web-screenshots/web_cluster" -name '*.png' | sort | sed "s|$root/||" | tr '\n' ' ')"

passed=1
log "PASS in $((SECONDS - t0)) s"
