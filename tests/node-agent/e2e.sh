#!/usr/bin/env bash
# End-to-end test of the Skiff node agent against the real local control plane (tests/cluster).
#
#   tests/node-agent/e2e.sh            # build the agent, up.sh with it, checks, down.sh
#
# Steps: build skiff-node-agent; write an image map (python-http -> this machine's python3);
# tests/cluster/up.sh with SKIFF_NODE_AGENT set (it waits for a Ready node); create a Deployment
# running `python3 -m http.server 8080` with an httpGet readinessProbe, and a Service; wait for the
# pod to be Running and Ready with a 10.244.0.x IP; curl the pod IP from the host; check that an
# EndpointSlice lists the ready pod IP; logs through the kubelet API with a pod `talk` that prints
# three lines and then one per HTTP request: `kubectl logs` (all, --tail=1, --limit-bytes), `logs -f`
# gets a line printed after it started and ends when the pod is deleted, an unknown container is
# an error, and the agent's :10250 answers 404 for an unknown container, 403 for a client
# certificate without nodes/proxy and 401 without one; delete the Deployment and check that the pod
# object, its process, its network namespace and its veth are gone; down.sh, then check that no process,
# namespace, veth or bridge is left. Exit status 0 only if every check passed. On failure the state
# dir is kept (KEEP_STATE=1) and the agent's log tail is printed.
#
# Environment: SKIFF_CLUSTER_DIR (default /tmp/skiff-cluster) and the other tests/cluster variables;
# SKIFF_E2E_NO_BUILD=1 skips `cargo build`; SKIFF_E2E_TIMEOUT (seconds per wait, default 90).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-cluster}"
dir="$SKIFF_CLUSTER_DIR"
timeout="${SKIFF_E2E_TIMEOUT:-90}"
bridge=skiff0
ns=skiff-e2e
t0=$SECONDS

log() { printf '[e2e %5ss] %s\n' "$((SECONDS - t0))" "$*"; }
fail() {
  log "FAIL: $*"
  exit 1
}

# Polls "$@" every 0.5 s until it succeeds or $timeout seconds pass.
wait_until() { # description command...
  local what="$1" deadline=$((SECONDS + timeout))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after ${timeout}s waiting for $what"
    sleep 0.5
  done
}

if [[ "${SKIFF_E2E_NO_BUILD:-0}" != 1 ]]; then
  log "building skiff-node-agent"
  (cd "$root" && cargo build -q -p skiff-node-agent)
fi
agent="$root/target/debug/skiff-node-agent"
[[ -x "$agent" ]] || fail "no agent binary at $agent"

work="$(mktemp -d /tmp/skiff-node-agent-e2e.XXXXXX)"
python="$(python3 -c 'import sys; print(sys.executable)')"
printf '{"python-http": "%s"}\n' "$python" >"$work/image-map.json"

cluster_started=0
passed=0
follow_pid=""
cleanup() {
  local rc=$?
  [[ -z "$follow_pid" ]] || kill "$follow_pid" 2>/dev/null || true
  if ((cluster_started)); then
    if ((passed)); then
      "$root/tests/cluster/down.sh" || rc=1
    else
      echo "---- node-agent.log (tail) ----"
      tail -n 40 "$dir/logs/node-agent.log" 2>/dev/null || true
      KEEP_STATE=1 "$root/tests/cluster/down.sh" || true
    fi
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

export SKIFF_NODE_AGENT="$agent --image-map $work/image-map.json --bridge $bridge"
log "starting the cluster with the node agent"
cluster_started=1
"$root/tests/cluster/up.sh"

export KUBECONFIG="$dir/admin.kubeconfig"
k() { kubectl "$@"; }

k create namespace "$ns" >/dev/null
k -n "$ns" apply -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: http
        image: python-http
        args: ["-m", "http.server", "8080"]
        ports:
        - {name: http, containerPort: 8080}
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 1
---
# Still running at down.sh: the agent's own exit must clean it up.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: keep
spec:
  replicas: 1
  selector:
    matchLabels: {app: keep}
  template:
    metadata:
      labels: {app: keep}
    spec:
      containers:
      - name: http
        image: python-http
        args: ["-m", "http.server", "8081"]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
  - {port: 80, targetPort: 8080}
EOF
log "created Deployment and Service web (and Deployment keep) in namespace $ns"

pod_ready() {
  [[ "$(k -n "$ns" get pods -l app=web -o jsonpath='{range .items[*]}{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')" == "Running/True" ]]
}
wait_until "a Running and Ready pod" pod_ready
pod="$(k -n "$ns" get pods -l app=web -o jsonpath='{.items[0].metadata.name}')"
uid="$(k -n "$ns" get pod "$pod" -o jsonpath='{.metadata.uid}')"
ip="$(k -n "$ns" get pod "$pod" -o jsonpath='{.status.podIP}')"
host_ip="$(k -n "$ns" get pod "$pod" -o jsonpath='{.status.hostIP}')"
[[ "$ip" =~ ^10\.244\.0\.[0-9]+$ ]] || fail "pod IP $ip is not in 10.244.0.0/24"
log "pod $pod is Running and Ready: podIP $ip, hostIP $host_ip"

code="$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$ip:8080/")"
[[ "$code" == 200 ]] || fail "curl http://$ip:8080/ from the host returned $code"
log "curl http://$ip:8080/ from the host: HTTP $code"

netns="$bridge-$uid"
ip netns list | grep -q "^$netns" || fail "no network namespace $netns"
pids="$(ip netns pids "$netns" | tr '\n' ' ')"
[[ -n "$pids" ]] || fail "no process in $netns"
for p in $pids; do
  tr '\0' ' ' <"/proc/$p/cmdline" | grep -q 'http.server 8080' || fail "process $p in $netns is not the http server"
done
log "the http server runs in network namespace $netns (pids: $pids)"
logfile="$dir/pods/${ns}_${pod}_http.log"
grep -q '"GET / HTTP/1.1" 200' "$logfile" || fail "container log $logfile has no request lines"
log "container log $logfile has the probe and curl requests"

slice_lists_ip() {
  k -n "$ns" get endpointslices -l kubernetes.io/service-name=web \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' | grep -qx "$ip"
}
wait_until "an EndpointSlice with the ready pod IP" slice_lists_ip
slice="$(k -n "$ns" get endpointslices -l kubernetes.io/service-name=web -o jsonpath='{.items[0].metadata.name}')"
log "EndpointSlice $slice lists $ip as ready"

# --- logs through the kubelet API ---------------------------------------------------------------
k -n "$ns" apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: talk
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: talk
    image: python-http
    args:
    - -u
    - -c
    - |
      import http.server
      for i in (1, 2, 3):
          print(f"hello {i}")
      class Say(http.server.BaseHTTPRequestHandler):
          def do_GET(self):
              print("said " + self.path[1:])
              self.send_response(200)
              self.end_headers()
          def log_message(self, *args):
              pass
      http.server.HTTPServer(("", 8082), Say).serve_forever()
    readinessProbe:
      tcpSocket: {port: 8082}
      periodSeconds: 1
EOF
talk_ready() {
  [[ "$(k -n "$ns" get pod talk -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]
}
wait_until "pod talk to be Ready" talk_ready
talk_ip="$(k -n "$ns" get pod talk -o jsonpath='{.status.podIP}')"
out="$(k -n "$ns" logs talk)"
[[ "$out" == $'hello 1\nhello 2\nhello 3' ]] || fail "kubectl logs talk printed: $out"
log "kubectl logs talk: the three lines the container printed"
out="$(k -n "$ns" logs talk --tail=1)"
[[ "$out" == "hello 3" ]] || fail "kubectl logs --tail=1 printed: $out"
out="$(k -n "$ns" logs talk --limit-bytes=5)"
[[ "$out" == "hello" ]] || fail "kubectl logs --limit-bytes=5 printed: $out"
log "kubectl logs --tail=1: 'hello 3'; --limit-bytes=5: 'hello'"
if out="$(k -n "$ns" logs talk -c nope 2>&1)"; then fail "kubectl logs -c nope succeeded: $out"; fi
[[ "$out" == *nope* ]] || fail "kubectl logs -c nope did not name the container: $out"
log "kubectl logs -c nope fails: $out"

k -n "$ns" logs -f talk >"$work/follow.out" 2>&1 &
follow_pid=$!
wait_until "kubectl logs -f to print the first lines" grep -qx 'hello 3' "$work/follow.out"
curl -fsS -m 5 -o /dev/null "http://$talk_ip:8082/late" || fail "pod talk does not answer on $talk_ip:8082"
wait_until "kubectl logs -f to print a line written after it started" grep -qx 'said late' "$work/follow.out"
log "kubectl logs -f streamed 'said late', printed after it started"

# The agent's kubelet API directly, with the cluster's certificates.
pki="$dir/pki"
kubelet() { # cert-base-or-empty path; prints the HTTP status, the body goes to $work/kubelet.out
  local auth=()
  [[ -z "$1" ]] || auth=(--cert "$pki/$1.crt" --key "$pki/$1.key")
  curl -sS -m 5 --cacert "$pki/ca.crt" "${auth[@]}" -o "$work/kubelet.out" -w '%{http_code}' \
    "https://$host_ip:10250$2"
}
code="$(kubelet apiserver-kubelet-client "/containerLogs/$ns/talk/nope")"
[[ "$code" == 404 ]] && grep -q '"nope"' "$work/kubelet.out" || fail "unknown container: HTTP $code $(cat "$work/kubelet.out")"
log "kubelet API, unknown container: 404 $(cat "$work/kubelet.out")"
code="$(kubelet apiserver-kubelet-client "/containerLogs/$ns/talk/talk?tailLines=1")"
[[ "$code" == 200 && "$(cat "$work/kubelet.out")" == "said late" ]] || fail "tailLines=1: HTTP $code $(cat "$work/kubelet.out")"
code="$(kubelet scheduler "/containerLogs/$ns/talk/talk")"
[[ "$code" == 403 ]] || fail "the scheduler's certificate got HTTP $code: $(cat "$work/kubelet.out")"
log "kubelet API, a certificate without nodes/proxy: 403 $(cat "$work/kubelet.out")"
code="$(kubelet "" "/containerLogs/$ns/talk/talk")"
[[ "$code" == 401 ]] || fail "no client certificate got HTTP $code: $(cat "$work/kubelet.out")"
log "kubelet API, no client certificate: 401"

k -n "$ns" delete pod talk --wait=false >/dev/null
follow_done() { ! kill -0 "$follow_pid" 2>/dev/null; }
wait_until "kubectl logs -f to end after pod talk was deleted" follow_done
wait "$follow_pid" || fail "kubectl logs -f exited with $?: $(tail -n 3 "$work/follow.out")"
follow_pid=""
log "kubectl logs -f ended when pod talk was deleted"

k -n "$ns" delete deployment web --wait=false >/dev/null
log "deleted Deployment web"
pod_gone() { ! k -n "$ns" get pod "$pod" >/dev/null 2>&1; }
wait_until "pod $pod to disappear" pod_gone
log "pod object $pod is gone"
for p in $pids; do
  [[ ! -e "/proc/$p" ]] || fail "process $p still runs"
done
! ip netns list | grep -q "^$netns" || fail "network namespace $netns still exists"
veth="skv$(tr -dc 0-9a-f <<<"$uid" | cut -c1-12)"
! ip link show dev "$veth" >/dev/null 2>&1 || fail "veth $veth still exists"
log "process, network namespace $netns and veth $veth are gone"
slice_empty() {
  [[ -z "$(k -n "$ns" get endpointslices -l kubernetes.io/service-name=web -o jsonpath='{.items[*].endpoints[*].addresses[*]}')" ]]
}
wait_until "the EndpointSlice to be empty" slice_empty
log "EndpointSlice for web has no endpoints"

keep_running() {
  [[ "$(k -n "$ns" get pods -l app=keep -o jsonpath='{.items[*].status.phase}')" == Running ]]
}
wait_until "pod keep to run" keep_running
keep_ip="$(k -n "$ns" get pods -l app=keep -o jsonpath='{.items[0].status.podIP}')"
curl -s -m 5 -o /dev/null "http://$keep_ip:8081/" || fail "pod keep does not answer on $keep_ip:8081"
log "pod keep runs at $keep_ip and stays up for down.sh"

# The veths of every pod on the node, by the agent's naming rule; other clusters' leftovers
# (another bridge's pods, a killed run's) are not this test's to judge.
pod_veths=()
for pod_uid in $(k get pods -A -o jsonpath='{.items[*].metadata.uid}'); do
  pod_veths+=("skv$(tr -dc 0-9a-f <<<"$pod_uid" | cut -c1-12)")
done
((${#pod_veths[@]} > 0)) || fail "no pod is left on the node for down.sh to stop"

passed=1
log "stopping the cluster"
"$root/tests/cluster/down.sh"
cluster_started=0

leftover_ns="$(ip netns list | grep -c "^$bridge-" || true)"
((leftover_ns == 0)) || fail "$leftover_ns network namespaces left after down.sh"
! ip link show dev "$bridge" >/dev/null 2>&1 || fail "bridge $bridge left after down.sh"
for v in "${pod_veths[@]}"; do
  ! ip link show dev "$v" >/dev/null 2>&1 || fail "veth $v left after down.sh"
done
! pgrep -f 'http.server 808[01]' >/dev/null || fail "http server processes left after down.sh"
log "after down.sh: no process, network namespace, veth or bridge left"
log "PASS"
