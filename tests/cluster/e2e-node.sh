#!/usr/bin/env bash
# End-to-end test of Skiff on a real node, brought up by `scripts/local-cluster.sh up` as a user
# runs it: the control plane of up.sh with the node of node.sh (the kubelet and kube-proxy of
# Kubernetes v1.35.8, containerd and runc, the CNI bridge, CoreDNS as the cluster DNS), running
# Skiff's own images built from deploy/docker/ (images.sh), as uid 65532 with the securityContext
# the manifests declare, and kube-router enforcing the NetworkPolicies.
#
#   flock /tmp/skiff-cluster.lock tests/cluster/e2e-node.sh
#
#   a. the node: `kubectl get node -o wide` shows kubelet v1.35.8 and a containerd:// runtime
#   b. DNS: CoreDNS (manifests/coredns.yaml) is Ready behind kube-dns 10.96.0.10, and answers
#      kubernetes.default.svc.cluster.local with the kubernetes Service's ClusterIP
#   c. Skiff: local-cluster.sh's `kubectl apply -k` of an overlay of deploy/base whose only changes
#      are kustomize `images:` (the local tags) and the model pods' images in
#      inferenceservice-config (the test then patches short autoscaler windows); every pod in
#      skiff-system is Ready, and every Skiff process runs as 65532
#   d. scale from zero: examples/iris.yaml (minReplicas 0; its model over HTTP from the node), in a namespace
#      with deploy/model-namespace's NetworkPolicy and Pod Security `restricted` enforced (a pod
#      without a restricted securityContext is refused there), is Ready with no
#      pod; the first V2 infer through the skiff-router Service's ClusterIP (kube-proxy) answers
#      label 1; its model pod's skiff-server runs as 65532 from the image's /usr/local/bin
#   e. scale to zero: idle, its Deployment goes back to 0 replicas and 0 pods
#   f. NetworkPolicies, enforced by kube-router's firewall: from a pod in another namespace
#      (tcpcheck, image skiff-probe) the activator, the controller and the web app are closed and
#      the router is open; once the activator's policy is deleted it is open. (d ran with
#      deploy/model-namespace's policy in the model namespace: the router and activator paths work.)
#   g. a transformer from zero (a custom container: image skiff-python, tests/fixtures/component.py)
#      in front of a warm predictor reaches it by the router's cluster DNS name, as KServe's
#      --predictor_host gives it, in the namespace that enforces Pod Security restricted (d)
#   h. that predictor's pod, reachable through the router (g), is closed to a pod in another namespace
#   i. replicas that cannot start are answered at once, not held for the activator's 300 s: ghost
#      (a custom container whose image no registry has: the kubelet's ErrImagePull/ImagePullBackOff)
#      and loose (a container that adds the capability NET_RAW, which the namespace's Pod Security refuses:
#      the ReplicaSet's FailedCreate) get 503 from zero naming the reason, and their status says it
#      (PredictorReady False with the reason, modelStatus BlockedByFailedLoad)
# Exit status 0 only if every check passed. On every exit `local-cluster.sh down` stops the cluster
# and cleans the node (node.sh clean: containers, mounts, cgroups, bridge, iptables chains); state
# and logs are kept on failure.
#
# Environment: SKIFF_E2E_NO_BUILD=1 skips `cargo build --workspace`; SKIFF_E2E_TIMEOUT (seconds per
# wait, 120); SKIFF_CLUSTER_DIR (/tmp/skiff-e2e-node); ports 6943/2879/10757/10759.
set -euo pipefail

e2e_name=e2e-node
# shellcheck source=tests/cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export SKIFF_CLUSTER_DIR="${SKIFF_CLUSTER_DIR:-/tmp/skiff-e2e-node}"
export SKIFF_APISERVER_PORT="${SKIFF_APISERVER_PORT:-6943}"
export SKIFF_ETCD_PORT="${SKIFF_ETCD_PORT:-2879}"
export SKIFF_KCM_PORT="${SKIFF_KCM_PORT:-10757}"
export SKIFF_SCHEDULER_PORT="${SKIFF_SCHEDULER_PORT:-10759}"
export SKIFF_LOCAL_TAG=e2e SKIFF_LOCAL_PROFILE="${SKIFF_LOCAL_PROFILE:-debug}"
dir="$SKIFF_CLUSTER_DIR"
ns=e2e
tag=e2e
stable_window_s=6
grace_s=2

e2e_build
e2e_need_root "a node needs root (containerd, the kubelet, iptables)"

cluster_started=0
passed=0
cleanup() {
  local rc=$?
  set +e
  if ((cluster_started)); then
    if ((!passed)); then
      for f in "$dir"/logs/kubelet.log "$dir"/logs/containerd.log; do
        echo "---- $f (tail) ----"
        tail -n 15 "$f"
      done
      for f in "$dir"/node/pod-logs/skiff-system_*/*/*.log "$dir"/node/pod-logs/"$ns"_*/*/*.log; do
        [[ -f "$f" ]] || continue
        echo "---- $f (tail) ----"
        tail -n 10 "$f"
      done
    fi
    if ((passed)); then
      "$root/scripts/local-cluster.sh" down >/dev/null || rc=1
    else
      KEEP_STATE=1 "$root/scripts/local-cluster.sh" down >/dev/null || rc=1
      echo "state and logs kept in $dir"
    fi
  fi
  [[ -n "${models_pid:-}" ]] && kill "$models_pid" 2>/dev/null
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the cluster: scripts/local-cluster.sh up, as a user runs it ---------------------------------
node_ip="$(e2e_node_ip)"
cluster_started=1
start=$SECONDS
"$root/scripts/local-cluster.sh" up 2>&1 | sed 's/^/    /'
[[ "${PIPESTATUS[0]}" == 0 ]] || fail "scripts/local-cluster.sh up failed"
export KUBECONFIG="$dir/admin.kubeconfig"
log "scripts/local-cluster.sh up: real node, Skiff Ready ($((SECONDS - start)) s)"
e2e_set_autoscaler "{\"stable-window\":\"${stable_window_s}s\",\"scale-to-zero-grace-period\":\"${grace_s}s\",\"allow-zero-initial-scale\":\"true\",\"initial-scale\":\"0\"}"
sleep 2 # the controller's ConfigMap watch

# a. the node
wide="$(k get node -o wide --no-headers)"
echo "$wide" | sed 's/^/    /'
read -r status version runtime <<<"$(k get node -o jsonpath='{.items[0].status.conditions[?(@.type=="Ready")].status} {.items[0].status.nodeInfo.kubeletVersion} {.items[0].status.nodeInfo.containerRuntimeVersion}')"
[[ "$wide" == *" $version "*"$runtime"* ]] || fail "kubectl get node -o wide does not show $version and $runtime"
[[ "$status" == True && "$version" == v1.35.8 && "$runtime" == containerd://* ]] ||
  fail "node: status $status, kubelet $version, runtime $runtime (want Ready, v1.35.8, containerd://)"
pass "a. node Ready: kubelet $version, runtime $runtime"

# b. DNS
dns_ready() { [[ "$(k -n kube-system get deploy coredns -o jsonpath='{.status.readyReplicas}')" == 1 ]]; }
wait_until "CoreDNS Ready" dns_ready
kube_ip="$(k get svc kubernetes -o jsonpath='{.spec.clusterIP}')"
resolves() { python3 - "$@" <<'PY'
import socket, struct, sys
name, server, want = sys.argv[1], sys.argv[2], sys.argv[3]
q = struct.pack(">HHHHHH", 0x5151, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.sendto(q, (server, 53))
r = s.recv(512)
sys.exit(0 if socket.inet_aton(want) in r[len(q):] else 1)
PY
}
wait_until "kube-dns (10.96.0.10) to answer kubernetes.default.svc.cluster.local" \
  resolves kubernetes.default.svc.cluster.local 10.96.0.10 "$kube_ip"
pass "b. CoreDNS answers kubernetes.default.svc.cluster.local = $kube_ip through the kube-dns ClusterIP"

# c. Skiff from deploy/base (local-cluster.sh's overlay: only the images differ)
k -n skiff-system get pods -o wide | sed 's/^/    /'
# uid_of BINARY: the uids of the processes running it (from the host's /proc).
uid_of() {
  local p
  for p in $(pgrep -f "^/usr/local/bin/$1( |$)"); do stat -c %u "/proc/$p"; done | sort -u | tr '\n' ' '
}
for b in skiff-controller skiff-router skiff-activator skiff-web; do
  uids="$(uid_of "$b")"
  [[ "$uids" == "65532 " ]] || fail "$b runs as uid(s) '$uids', want 65532"
done
pass "c. Skiff from deploy/base with local images: every pod Ready; controller, router, activator, web run as 65532"

# d. scale from zero through the router's Service
k create namespace "$ns" >/dev/null
# The model namespace's policy, unchanged: only the router, activator and controller reach model pods.
k -n "$ns" apply -f "$root/deploy/model-namespace/networkpolicy.yaml" >/dev/null
# Pod Security: the model namespace enforces `restricted`, as deploy/model-namespace/README.md says.
k label namespace "$ns" pod-security.kubernetes.io/enforce=restricted >/dev/null
refusal="$(k -n "$ns" run loose --image="localhost/skiff-probe:$tag" --restart=Never -- 127.0.0.1 1 2>&1)" &&
  fail "a pod without a restricted securityContext was admitted in namespace $ns"
[[ "$refusal" == *'violates PodSecurity "restricted'* ]] || fail "the loose pod was refused for another reason: $refusal"
pass "d. namespace $ns enforces Pod Security restricted: a pod without its securityContext is refused"
# The models come over HTTP from the node's address: a file:// model is a hostPath volume, which
# Pod Security refuses in a restricted namespace (as it should: a store is what a cluster uses).
models_port=18931
python3 -m http.server --bind "$node_ip" --directory "$root/examples/models" "$models_port" >/dev/null 2>&1 &
models_pid=$!
models="http://$node_ip:$models_port"
sed "s|storageUri: file://./models/iris|storageUri: $models/iris/model.onnx|" "$root/examples/iris.yaml" |
  k -n "$ns" apply -f - >/dev/null
isvc_ready() { [[ "$(k -n "$ns" get isvc iris -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
wait_until "iris Ready" isvc_ready
pods() { k -n "$ns" get pods -l serving.kserve.io/inferenceservice=iris --no-headers 2>/dev/null | wc -l; }
[[ "$(pods)" == 0 ]] || fail "iris has $(pods) pods before any request (minReplicas 0, initial scale 0)"
router_ip="$(k -n skiff-system get svc skiff-router -o jsonpath='{.spec.clusterIP}')"
host="$(k -n "$ns" get isvc iris -o jsonpath='{.status.url}')"
host="${host#*://}"
body='{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'
t_req="$(now_ms)"
answer="$(curl -sS --max-time 120 -H "Host: $host" -H 'content-type: application/json' \
  "http://$router_ip/v2/models/iris/infer" -d "$body")" || fail "the first request failed: $answer"
cold="$(secs $(($(now_ms) - t_req)))"
label="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["outputs"][0]["data"][0])' "$answer" 2>/dev/null)" ||
  fail "the first request answered $answer"
[[ "$label" == 1 ]] || fail "iris answered label $label, want 1 ($answer)"
uids="$(uid_of skiff-server)"
[[ "$uids" == "65532 " ]] || fail "skiff-server runs as uid(s) '$uids', want 65532"
pass "d. scale from zero through the skiff-router Service ($router_ip, kube-proxy): label 1 in ${cold}s; skiff-server runs as 65532"

# e. scale to zero
gone() { [[ "$(k -n "$ns" get deploy -l serving.kserve.io/inferenceservice=iris -o jsonpath='{.items[0].spec.replicas}')" == 0 && "$(pods)" == 0 ]]; }
wait_until "iris back to zero" gone
pass "e. idle: iris back to 0 replicas and 0 pods"

# f. NetworkPolicies (deploy/base's, enforced by kube-router) from a pod in another namespace
k create namespace outsider >/dev/null
pod_ip() { k -n skiff-system get pods -l "app.kubernetes.io/name=$1" -o jsonpath='{.items[0].status.podIP}'; }
probe_n=0
# reach IP PORT: sets `reached` to open or closed, as tcpcheck saw it from a pod in namespace outsider.
reach() {
  local name="probe-$((probe_n += 1))" phase
  k -n outsider run "$name" --image="localhost/skiff-probe:$tag" --image-pull-policy=IfNotPresent \
    --restart=Never -- "$1" "$2" >/dev/null
  probe_done() {
    phase="$(k -n outsider get pod "$name" -o jsonpath='{.status.phase}')"
    [[ "$phase" == Succeeded || "$phase" == Failed ]]
  }
  wait_until "probe pod $name" probe_done
  reached=closed
  [[ "$phase" == Succeeded ]] && reached=open
  return 0
}
for target in skiff-activator:8012 skiff-controller:8081 skiff-web:5000 skiff-router:8080; do
  app="${target%:*}" port="${target#*:}"
  reach "$(pod_ip "$app")" "$port"
  want=closed
  [[ "$app" == skiff-router ]] && want=open
  [[ "$reached" == "$want" ]] || fail "from namespace outsider, $app:$port is $reached (want $want)"
done
k -n skiff-system delete networkpolicy skiff-activator >/dev/null
opened() { reach "$(pod_ip skiff-activator)" 8012 && [[ "$reached" == open ]]; }
wait_until "the activator open once its policy is gone" opened
pass "f. from another namespace: activator, controller, web closed and the router open; the activator opens when its NetworkPolicy is deleted"

# g. a transformer (a custom container, image skiff-python) from zero in front of a warm predictor;
# it reaches the predictor by the name KServe's contract gives it: the router's cluster DNS name.
predictor_host="skiff-router.skiff-system.svc.cluster.local/serving/$ns/pipe-predictor"
python3 - "$ns" "$models/iris/model.onnx" "$(cat "$root/tests/fixtures/component.py")" "$tag" <<'PY' |
import json, sys
ns, uri, script, tag = sys.argv[1:5]
print(json.dumps({
    "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
    "metadata": {"name": "pipe", "namespace": ns},
    "spec": {
        "predictor": {"minReplicas": 1, "model": {"modelFormat": {"name": "onnx"}, "protocolVersion": "v2",
                                                  "storageUri": uri}},
        "transformer": {"minReplicas": 0, "containers": [{"name": "kserve-container",
                                                         "image": f"localhost/skiff-python:{tag}",
                                                         "args": ["-c", script]}]},
    },
}))
PY
  k apply -f - >/dev/null
pipe_ready() { [[ "$(k -n "$ns" get isvc pipe -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
timeout=$((timeout + 60)) wait_until "pipe Ready" pipe_ready
pipe_host="$(k -n "$ns" get isvc pipe -o jsonpath='{.status.url}')"
pipe_host="${pipe_host#*://}"
answer="$(curl -sS --max-time 120 -H "Host: $pipe_host" -H 'content-type: application/json' \
  "http://$router_ip/v2/models/pipe/infer" -d "$body")" || fail "g. the first request to pipe failed: $answer"
mark="$(python3 -c 'import json,sys; a=json.loads(sys.argv[1]); t=a["transformer"]; print(a["outputs"][0]["data"][0], t["predictor_host"], t["env"])' "$answer" 2>/dev/null)" ||
  fail "g. pipe answered $answer"
[[ "$mark" == "1 $predictor_host $predictor_host" ]] || fail "g. pipe's answer: '$mark', want '1 $predictor_host $predictor_host'"
pass "g. transformer (skiff-python, from zero) -> $predictor_host (CoreDNS, kube-proxy) -> pipe-predictor: label 1"

# h. a model pod answers only what its namespace's policy allows: not a pod in another namespace.
predictor_ip="$(k -n "$ns" get pods -l serving.kserve.io/inferenceservice=pipe,component=predictor -o jsonpath='{.items[0].status.podIP}')"
[[ -n "$predictor_ip" ]] || fail "h. pipe's predictor has no pod"
reach "$predictor_ip" 8080
[[ "$reached" == closed ]] || fail "h. from namespace outsider, pipe's predictor pod $predictor_ip:8080 is $reached (want closed)"
pass "h. from another namespace, pipe's predictor pod ($predictor_ip:8080) is closed; through the router it answered (g)"

# i. replicas that cannot start: an image no registry has, a pod Pod Security refuses.
unstartable() { # name container-json
  k -n "$ns" apply -f - >/dev/null <<EOF
{"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
 "metadata": {"name": "$1", "namespace": "$ns"},
 "spec": {"predictor": {"minReplicas": 0, "containers": [$2]}}}
EOF
}
unstartable ghost '{"name": "kserve-container", "image": "localhost/skiff-nope:'"$tag"'"}'
unstartable loose '{"name": "kserve-container", "image": "localhost/skiff-python:'"$tag"'", "args": ["-m", "http.server", "8080"], "securityContext": {"capabilities": {"add": ["NET_RAW"]}}}'
for name in ghost loose; do
  ready_of() { [[ "$(k -n "$ns" get isvc "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" == True ]]; }
  wait_until "$name Ready at zero" ready_of "$name"
  url="$(k -n "$ns" get isvc "$name" -o jsonpath='{.status.url}')"
  t_req="$(now_ms)"
  code="$(curl -sS -o "$dir/$name.json" -w '%{http_code}' --max-time 100 -H "Host: ${url#*://}" "http://$router_ip/")" ||
    fail "i. the request to $name failed: $(cat "$dir/$name.json" 2>/dev/null)"
  took="$(secs $(($(now_ms) - t_req)))"
  reason="$(k -n "$ns" get isvc "$name" -o jsonpath='{.status.conditions[?(@.type=="PredictorReady")].reason} {.status.modelStatus.transitionStatus}')"
  case "$name" in
    ghost) want='^(ErrImagePull|ImagePullBackOff) BlockedByFailedLoad$' ;;
    loose) want='^FailedCreate BlockedByFailedLoad$' ;;
  esac
  [[ "$code" == 503 && "$reason" =~ $want ]] ||
    fail "i. $name answered $code in ${took}s ($(cat "$dir/$name.json")), status '$reason' (wanted 503 and $want)"
  grep -q "${reason%% *}" "$dir/$name.json" || fail "i. $name's answer does not name ${reason%% *}: $(cat "$dir/$name.json")"
  pass "i. $name: 503 in ${took}s from zero, naming ${reason%% *}; status $reason: $(k -n "$ns" get isvc "$name" -o jsonpath='{.status.conditions[?(@.type=="PredictorReady")].message}' | cut -c1-140)"
done

passed=1
log "all checks passed"
