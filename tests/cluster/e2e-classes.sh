#!/usr/bin/env bash
# End-to-end test of KServe's autoscaler classes on a local cluster (scripts/local-cluster.sh up:
# the real control plane of tests/cluster, whose kube-controller-manager runs the HPA controller and
# the garbage collector, the real node running Skiff's images, deploy/base with the local images; no
# metrics-server, no KEDA).
#
#   tests/cluster/e2e-classes.sh     # build, local-cluster up, checks, local-cluster down
#
#   1. hpa (serving.kserve.io/deploymentMode: Standard, scaleMetric cpu, scaleTarget 60, 1..3
#      replicas): the revision gets an autoscaling/v2 HorizontalPodAutoscaler with KServe's spec,
#      owned by its Deployment, and the HPA controller processes it (its conditions are set; without
#      metrics-server it cannot read CPU, so ScalingActive is False).
#   2. Skiff's KPA leaves replicas alone for hpa, external and none: each revision, scaled to 2 by
#      hand, still has 2 after three of the KPA's stable windows, and no decision is exported for
#      it; a kpa revision (the control) scaled to 2 by hand goes back to 1.
#   3. A revision at zero (scaled there by hand, as an HPA with HPAScaleToZero or KEDA would) holds
#      its first request through the router and the activator, is woken to one replica and answers
#      200: hpa and external, and none created at zero (minReplicas 0, as KServe sets its replicas).
#   4. keda on a cluster without KEDA: Ready False, reason KedaNotInstalled, naming the CRD.
#   5. A switch of class (hpa to external) rolls a new revision; the old revision is kept at zero
#      and its HPA goes.
#
# Environment: SKIFF_E2E_NO_BUILD=1 skips `cargo build --workspace`; SKIFF_E2E_TIMEOUT (seconds per
# wait, 120); the local-cluster variables (SKIFF_CLUSTER_DIR defaults to /tmp/skiff-e2e-classes,
# ports 7343/3279/11157/11159).
set -euo pipefail

e2e_name=e2e-classes
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-classes}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-7343}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-3279}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-11157}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-11159}"
export SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
ns=e2e
stable_window_s=6

e2e_build
e2e_need_root "a node needs root (containerd, the kubelet, iptables)"

cluster_started=0
passed=0
cleanup() {
  local rc=$?
  set +e
  if ((cluster_started)); then
    if ((passed)); then
      "$root/scripts/local-cluster.sh" down >/dev/null || rc=1
    else
      echo "---- skiff-controller (tail) ----"
      k -n skiff-system logs -l app.kubernetes.io/name=skiff-controller --prefix --tail=25
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

router=""
ready_router() {
  router="$(k -n skiff-system get pods -l app.kubernetes.io/name=skiff-router -o jsonpath='{range .items[*]}{.status.podIP}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 == "True" && $1 != "" {print $1 ":8080"; exit}')"
  [[ -n "$router" ]]
}
wait_until "a Ready router pod" ready_router
k -n skiff-system patch configmap inferenceservice-config --type merge \
  -p "{\"data\": {\"autoscaler\": \"{\\\"stable-window\\\": \\\"${stable_window_s}s\\\"}\"}}" >/dev/null
k create namespace "$ns" >/dev/null

# An iris InferenceService `name` with `annotations` (a flow mapping) and `fields` under predictor.
apply() { # name annotations fields
  k apply -f - >/dev/null <<EOF
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: $1
  namespace: $ns
  annotations: $2
spec:
  predictor:
$3
    model:
      modelFormat: {name: onnx}
      protocolVersion: v2
      storageUri: file://$root/examples/models/iris
EOF
}
apply cpu '{serving.kserve.io/deploymentMode: Standard}' \
  "    minReplicas: 1
    maxReplicas: 3
    scaleMetric: cpu
    scaleTarget: 60"
apply ext '{serving.kserve.io/autoscalerClass: external}' "    minReplicas: 1"
apply fixed '{serving.kserve.io/autoscalerClass: none}' "    minReplicas: 1"
apply kpa '{}' "    minReplicas: 1"
apply zero '{serving.kserve.io/autoscalerClass: none}' "    minReplicas: 0"
ready() { [[ "$(k -n "$ns" get isvc "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
for name in cpu ext fixed kpa zero; do wait_until "$name Ready" ready "$name"; done
[[ "$(k -n "$ns" get deployment zero-predictor-00001 -o jsonpath='{.spec.replicas}')" == 0 ]] ||
  fail "zero (none, minReplicas 0) was not created at zero replicas"
pass "cpu (Standard: hpa), ext (external), fixed (none), kpa, and zero (none at minReplicas 0, no pod) Ready; router $router"

# 1. The HPA, and the HPA controller's processing of it.
hpa=cpu-predictor-00001
spec="$(k -n "$ns" get hpa "$hpa" -o jsonpath='{.spec.scaleTargetRef.kind}/{.spec.scaleTargetRef.name} {.spec.minReplicas}..{.spec.maxReplicas} {.spec.metrics[0].resource.name} {.spec.metrics[0].resource.target.type} {.spec.metrics[0].resource.target.averageUtilization} owner {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}')" ||
  fail "1. no HPA $hpa"
[[ "$spec" == "Deployment/$hpa 1..3 cpu Utilization 60 owner Deployment/$hpa" ]] || fail "1. the HPA's spec: $spec"
processed() { [[ -n "$(k -n "$ns" get hpa "$hpa" -o jsonpath='{.status.conditions[?(@.type=="ScalingActive")].status}')" ]]; }
wait_until "the HPA controller to set $hpa's conditions" processed
conditions="$(k -n "$ns" get hpa "$hpa" -o jsonpath='{range .status.conditions[*]}{.type}={.status} ({.reason}); {end}')"
pass "1. $spec; the HPA controller's conditions: $conditions"
others="$(k -n "$ns" get hpa -o name | grep -v "$hpa" || true)"
[[ -z "$others" ]] || fail "1. external, none and kpa make no HPA, but there are: $others"

# 2. Replicas left alone for hpa, external and none; the kpa control goes back to its minimum.
leader="$(k -n skiff-system get lease skiff-controller -o jsonpath='{.spec.holderIdentity}')"
leader_ip="$(k -n skiff-system get pod "$leader" -o jsonpath='{.status.podIP}')"
for name in cpu ext fixed kpa; do k -n "$ns" scale deployment "$name-predictor-00001" --replicas=2 >/dev/null; done
replicas() { k -n "$ns" get deployment "$1-predictor-00001" -o jsonpath='{.spec.replicas}'; }
back_to_one() { [[ "$(replicas kpa)" == 1 ]]; }
wait_until "the kpa control back to 1 replica" back_to_one
sleep $((3 * stable_window_s))
for name in cpu ext fixed; do
  [[ "$(replicas "$name")" == 2 ]] || fail "2. $name: replicas $(replicas "$name"), not the 2 set by hand"
done
decisions="$(curl -fsS "http://$leader_ip:8081/metrics" | grep '^skiff_controller_autoscaler_desired_pods{' || true)"
for name in cpu ext fixed; do
  ! grep -q "revision=\"$name-predictor-00001\"" <<<"$decisions" || fail "2. the KPA decides for $name: $decisions"
done
grep -q 'revision="kpa-predictor-00001"' <<<"$decisions" || fail "2. no KPA decision for the control: $decisions"
pass "2. hpa, external and none kept the 2 replicas set by hand for $((3 * stable_window_s)) s with no KPA decision; the kpa control went back to 1"

# 3. At zero, the first request is held and wakes the revision.
infer() { # name: the HTTP code of one V2 infer through the router
  curl -sS -m 120 -o /dev/null -w '%{http_code}' -H "Host: $1.$ns.example.com" -H 'Content-Type: application/json' \
    "http://$router/v2/models/$1/infer" -d '{"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.8, 2.8, 4.8, 1.4]}]}'
}
for name in cpu ext zero; do
  k -n "$ns" scale deployment "$name-predictor-00001" --replicas=0 >/dev/null
  no_pod() { [[ "$(k -n "$ns" get pods -l "serving.kserve.io/inferenceservice=$1" --no-headers 2>/dev/null | wc -l)" == 0 ]]; }
  wait_until "$name's pods gone" no_pod "$name"
  start=$SECONDS
  code="$(infer "$name")" || fail "3. the infer of $name at zero failed"
  [[ "$code" == 200 ]] || fail "3. the infer of $name at zero answered $code"
  [[ "$(replicas "$name")" == 1 ]] || fail "3. $name woken to $(replicas "$name") replicas, not 1"
  pass "3. $name at zero: the first request held, the revision woken to 1 replica, 200 in $((SECONDS - start)) s"
done

# 4. keda without KEDA.
apply events '{serving.kserve.io/autoscalerClass: keda}' \
  "    autoScaling:
      metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}"
refused() { [[ "$(k -n "$ns" get isvc events -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" == KedaNotInstalled ]]; }
wait_until "events refused with KedaNotInstalled" refused
message="$(k -n "$ns" get isvc events -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
[[ "$message" == *scaledobjects.keda.sh* ]] || fail "4. the condition does not name the CRD: $message"
[[ -z "$(k -n "$ns" get deployments -l serving.kserve.io/inferenceservice=events -o name)" ]] || fail "4. events got a Deployment"
pass "4. keda without KEDA: Ready False, KedaNotInstalled: $message"

# 5. A switch of class: a new revision, and the old one's HPA goes with it.
apply cpu '{serving.kserve.io/deploymentMode: Standard, serving.kserve.io/autoscalerClass: external}' \
  "    minReplicas: 1
    maxReplicas: 3"
rolled() { [[ "$(k -n "$ns" get isvc cpu -o jsonpath='{.status.components.predictor.latestReadyRevision}')" == cpu-predictor-00002 ]]; }
wait_until "cpu's second revision Ready" rolled
hpa_gone() { ! k -n "$ns" get hpa "$hpa" >/dev/null 2>&1; }
timeout=$((timeout + 60)) wait_until "the old revision's HPA gone (after the 30 s retention)" hpa_gone
[[ -z "$(k -n "$ns" get hpa -o name)" ]] || fail "5. HPAs left: $(k -n "$ns" get hpa -o name)"
pass "5. hpa to external: revision cpu-predictor-00002 without an HPA; the old revision's HPA removed with it"
passed=1
