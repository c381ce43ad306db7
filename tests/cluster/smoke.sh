#!/usr/bin/env bash
# Smoke test of the local control plane: up.sh, then checks that the apiserver stores objects,
# that the controller-manager (ReplicaSet, EndpointSlice, ServiceAccount controllers) and the
# scheduler act on them, that service-account tokens are issued, and that skiff-user's rights
# come from RBAC only; then down.sh. Exits non-zero on any failure (state is then kept in
# $SKIFF_CLUSTER_DIR for the logs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-cluster}"
dir="$SKIFF_CLUSTER_DIR"
ns=skiff-smoke
admin=(kubectl --kubeconfig "$dir/admin.kubeconfig" --request-timeout=10s)
user=(kubectl --kubeconfig "$dir/user.kubeconfig" --request-timeout=10s)

pass() { echo "smoke: ok   $*"; }
fail() { echo "smoke: FAIL $*" >&2; exit 1; }
# eventually <timeout-s> <description> <cmd...>: retries until cmd succeeds.
eventually() {
  local timeout="$1" what="$2"; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "$what (not true after ${timeout}s)"
    sleep 0.5
  done
  pass "$what"
}

finish() {
  local rc=$?
  set +e
  if [[ $rc -ne 0 ]]; then
    echo "smoke: failed; objects in $ns:" >&2
    "${admin[@]}" -n "$ns" get all,endpointslices,events 2>&1 | tail -n 40 >&2
    KEEP_STATE=1 "$here/down.sh" || rc=1
    echo "smoke: state and logs kept in $dir" >&2
  else
    "$here/down.sh" || rc=1
    # down.sh must leave nothing behind.
    [[ ! -e "$dir" ]] || { echo "smoke: FAIL state dir $dir still there" >&2; rc=1; }
    ((rc == 0)) && echo "smoke: PASSED"
  fi
  exit $rc
}
trap finish EXIT

start=$SECONDS
"$here/up.sh"
echo "smoke: cluster up in $((SECONDS - start))s"

# --- apiserver: plain storage -----------------------------------------------------------------
"${admin[@]}" get --raw /readyz | grep -qx ok || fail "/readyz"
pass "/readyz"
version="$("${admin[@]}" get --raw /version | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p')"
[[ "$version" == v1.* ]] || fail "apiserver version is '$version'"
pass "apiserver version $version"
"${admin[@]}" create namespace "$ns" >/dev/null
"${admin[@]}" -n "$ns" create configmap smoke --from-literal=model=resnet >/dev/null
[[ "$("${admin[@]}" -n "$ns" get configmap smoke -o jsonpath='{.data.model}')" == resnet ]] \
  || fail "ConfigMap round trip"
pass "namespace + ConfigMap round trip"

# --- controller-manager: Deployment -> ReplicaSet -> Pod; scheduler marks it -----------------
"${admin[@]}" -n "$ns" create deployment web --image=registry.invalid/skiff/smoke:1 --replicas=1 >/dev/null
exists() { "${admin[@]}" -n "$ns" get "$@" -o name | grep -q .; }
eventually 60 "Deployment controller created a ReplicaSet" exists replicasets -l app=web
eventually 60 "ReplicaSet controller created a Pod" exists pods -l app=web
# With no node the scheduler reports the pod Unschedulable; with a node it binds it.
scheduled_condition() {
  "${admin[@]}" -n "$ns" get pods -l app=web \
    -o jsonpath='{.items[0].status.conditions[?(@.type=="PodScheduled")].status}' | grep -Eqx 'True|False'
}
eventually 60 "scheduler processed the Pod (PodScheduled condition set)" scheduled_condition

# --- Service -> EndpointSlice ---------------------------------------------------------------
"${admin[@]}" -n "$ns" create service clusterip web --tcp=80:8080 >/dev/null
cluster_ip="$("${admin[@]}" -n "$ns" get service web -o jsonpath='{.spec.clusterIP}')"
[[ "$cluster_ip" == 10.96.* ]] || fail "Service clusterIP '$cluster_ip' not in 10.96.0.0/16"
pass "Service got clusterIP $cluster_ip"
eventually 60 "EndpointSlice controller created an EndpointSlice for the Service" \
  exists endpointslices -l kubernetes.io/service-name=web

# --- service accounts ------------------------------------------------------------------------
eventually 60 "ServiceAccount controller created $ns/default" \
  "${admin[@]}" -n "$ns" get serviceaccount default
"${admin[@]}" -n "$ns" create token default --duration=10m | grep -q '^ey' || fail "TokenRequest"
pass "TokenRequest issued a service-account token"
"${admin[@]}" -n "$ns" get configmap kube-root-ca.crt >/dev/null || fail "kube-root-ca.crt ConfigMap"
pass "root CA publisher created kube-root-ca.crt"

# --- skiff-user: rights only from RBAC ------------------------------------------------------
whoami="$("${user[@]}" auth whoami -o jsonpath='{.status.userInfo.username}')"
[[ "$whoami" == skiff-user ]] || fail "user kubeconfig authenticates as '$whoami'"
pass "user kubeconfig authenticates as skiff-user"
answer="$("${user[@]}" -n "$ns" auth can-i create deployments.apps || true)"
[[ "$answer" == no ]] || fail "skiff-user can-i create deployments before RBAC: '$answer' (want no)"
pass "skiff-user cannot create deployments without RBAC"
if "${user[@]}" -n "$ns" get configmaps >/dev/null 2>&1; then fail "skiff-user could list configmaps"; fi
pass "skiff-user is forbidden to list configmaps"

"${admin[@]}" -n "$ns" create role deployer --verb=get,list,watch,create,update,patch,delete \
  --resource=deployments.apps >/dev/null
"${admin[@]}" -n "$ns" create rolebinding skiff-user-deployer --role=deployer --user=skiff-user >/dev/null
can_create() { [[ "$("${user[@]}" -n "$ns" auth can-i create deployments.apps || true)" == yes ]]; }
eventually 30 "skiff-user can create deployments after Role + RoleBinding" can_create
answer="$("${user[@]}" -n default auth can-i create deployments.apps || true)"
[[ "$answer" == no ]] || fail "RoleBinding leaked outside $ns: '$answer'"
pass "grant is confined to namespace $ns"
"${user[@]}" -n "$ns" create deployment by-user --image=registry.invalid/skiff/smoke:1 >/dev/null \
  || fail "skiff-user create deployment"
pass "skiff-user created a Deployment"

echo "smoke: all checks passed in $((SECONDS - start))s"
