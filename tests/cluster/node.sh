#!/usr/bin/env bash
# A real Kubernetes node for the local test cluster: containerd (Debian's, with runc), the CNI
# bridge, host-local, loopback and portmap plugins (Debian's containernetworking-plugins), the
# kubelet and kube-proxy (iptables mode) built from k8s.io/kubernetes by build.sh, at the control
# plane's version, and kube-router's firewall controller (from its Go module) enforcing
# NetworkPolicies. All state lives in $SKIFF_CLUSTER_DIR/node; pods' cgroups under /skiff-node.
#
#   node.sh run      the node, in the foreground: up.sh starts it as its SKIFF_NODE_COMMAND (so
#                    down.sh stops it); imports every OCI archive in $SKIFF_NODE_IMAGES into
#                    containerd's k8s.io namespace before the kubelet starts
#   node.sh clean    after down.sh: kills what containerd left running (containers, shims), unmounts
#                    and removes the node's state, its cgroups, the CNI bridge and the iptables
#                    chains and ipsets the kubelet, kube-proxy, kube-router and the CNI plugins
#                    made (KUBE-*, CNI-*, kube-router-*), and
#                    puts back the sysctls run changed. Safe to run twice, or with nothing to clean.
#
# Environment: SKIFF_CLUSTER_DIR (/tmp/skiff-cluster); SKIFF_NODE_NAME (skiff-node); SKIFF_NODE_IP
# (the node's InternalIP, the default route's source address); SKIFF_NODE_POD_CIDR (10.246.0.0/24);
# SKIFF_NODE_BRIDGE (sknode0); SKIFF_NODE_IMAGES (a folder of OCI archives, from images.sh);
# SKIFF_NODE_PAUSE_IMAGE (localhost/skiff-pause:e2e); SKIFF_CLUSTER_BIN (build.sh's bin dir).
#
# This machine runs cgroup v1 (/sys/fs/cgroup is a tmpfs of v1 controllers). The kubelet of
# Kubernetes 1.35 refuses to start there unless its configuration sets failCgroupV1: false
# (KEP-5573, cgroup v1 in maintenance mode); it is set below, and nothing else changes for it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${SKIFF_CLUSTER_DIR:-/tmp/skiff-cluster}"
node="$dir/node"
node_name="${SKIFF_NODE_NAME:-skiff-node}"
pod_cidr="${SKIFF_NODE_POD_CIDR:-10.246.0.0/24}"
bridge="${SKIFF_NODE_BRIDGE:-sknode0}"
pause_image="${SKIFF_NODE_PAUSE_IMAGE:-localhost/skiff-pause:e2e}"
cgroup_root=/skiff-node
cluster_dns=10.96.0.10
sock="$node/containerd.sock"
sysctls=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables)

default_ip() { ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p'; }

# The cgroup v1 hierarchies the kubelet checks for its cgroup root (the controllers and the named
# systemd one; not the cgroup v2 one of a hybrid layout).
controllers() {
  local c
  for c in /sys/fs/cgroup/*/; do
    c="${c%/}"
    [[ -f "$c/cgroup.procs" && "${c##*/}" != unified ]] && echo "$c"
  done
}

cmd_run() {
  local bin="${SKIFF_CLUSTER_BIN:?SKIFF_CLUSTER_BIN is build.sh output}" node_ip="${SKIFF_NODE_IP:-$(default_ip)}" c s
  # up.sh writes its kubeconfigs under umask 077, which its children inherit; with it containerd
  # would make every image layer's directories 0700 and uid 65532 could not reach its own binary
  # ("stat /coredns: permission denied" on a read-only root file system).
  umask 022
  mkdir -p "$node"/{cni,cni-ipam,containerd,kubelet,pod-logs}
  # The sysctls a node needs, their old values kept for clean.
  if [[ ! -f "$node/sysctl.orig" ]]; then
    for s in "${sysctls[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$node/sysctl.orig"
  fi
  for s in "${sysctls[@]}"; do sysctl -qw "$s=1"; done
  for c in $(controllers); do mkdir -p "$c$cgroup_root"; done

  cat >"$node/containerd.toml" <<TOML
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  netns_mounts_under_state_dir = true
  # Root here lacks CAP_SYS_RESOURCE, so an oom_score_adj below containerd's own (the kubelet asks
  # -998 for sandboxes) is refused (runc: "failed to update /proc/self/oom_score_adj: Permission
  # denied"): clamp it to containerd's, as for rootless containerd.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state under the node's too (not /run/containerd/runc), so that clean removes it.
        Root = "$node/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni"
TOML
  cat >"$node/cni/10-skiff.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "skiff-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}],
               "dataDir": "$node/cni-ipam"}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  cat >"$node/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine: see the top of node.sh.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $cgroup_root
containerRuntimeEndpoint: unix://$sock
podLogsDir: $node/pod-logs
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $dir/pki/kubelet.crt
tlsPrivateKeyFile: $dir/pki/kubelet.key
port: ${SKIFF_KUBELET_PORT:-10250}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
clusterDNS: [$cluster_dns]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
# A test machine's disk is shared with builds: evict on memory only, and never collect images
# (they were imported, there is no registry to pull them back from).
evictionHard: {memory.available: 100Mi}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
YAML
  cat >"$node/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: $node_name
clusterCIDR: $pod_cidr
clientConnection: {kubeconfig: $dir/admin.kubeconfig}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the conntrack table's sysctls as they are (a VM's may be read-only).
conntrack: {maxPerCore: 0, min: 0}
YAML

  local pids=()
  trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT
  trap 'exit 0' TERM INT
  containerd --config "$node/containerd.toml" >"$dir/logs/containerd.log" 2>&1 &
  pids+=($!)
  local deadline=$((SECONDS + 30))
  until ctr --address "$sock" version >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "node.sh: containerd did not start (see $dir/logs/containerd.log)" >&2; exit 1; }
    sleep 0.2
  done
  local tar
  for tar in "${SKIFF_NODE_IMAGES:-/nonexistent}"/*.tar; do
    [[ -f "$tar" ]] || continue
    ctr --address "$sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null
    echo "node.sh: imported ${tar##*/}"
  done
  ctr --address "$sock" -n k8s.io images ls -q | sed 's/^/node.sh: image /'
  "$bin/kubelet" --config="$node/kubelet.yaml" --kubeconfig="$dir/node.kubeconfig" \
    --hostname-override="$node_name" --node-ip="$node_ip" --root-dir="$node/kubelet" \
    >"$dir/logs/kubelet.log" 2>&1 &
  pids+=($!)
  "$bin/kube-proxy" --config="$node/kube-proxy.yaml" >"$dir/logs/kube-proxy.log" 2>&1 &
  pids+=($!)
  # NetworkPolicies: kube-router's firewall controller only (no routing, no service proxy). It
  # needs the Node object, which the kubelet registers.
  deadline=$((SECONDS + 60))
  until kubectl --kubeconfig "$dir/admin.kubeconfig" --request-timeout=5s get node "$node_name" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "node.sh: the kubelet did not register $node_name (see $dir/logs/kubelet.log)" >&2; exit 1; }
    sleep 0.5
  done
  # NetworkPolicies: kube-router's firewall controller only (no routing, no service proxy).
  "$bin/kube-router" --run-firewall=true --run-router=false --run-service-proxy=false \
    --kubeconfig="$dir/admin.kubeconfig" --hostname-override="$node_name" \
    --metrics-port=0 --health-port=20244 >"$dir/logs/kube-router.log" 2>&1 &
  pids+=($!)
  echo "node.sh: containerd, kubelet, kube-proxy and kube-router started (node $node_name at $node_ip, pods $pod_cidr)"
  wait -n "${pids[@]}"
  echo "node.sh: a node process exited; stopping the others" >&2
  exit 1
}

# iptables and ip6tables rules and chains whose names start with $1, in every table, removed.
drop_chains() {
  local prefix="$1" cmd table rule chain
  for cmd in iptables ip6tables; do
    for table in nat filter mangle; do
      "$cmd" -t "$table" -S 2>/dev/null | { grep -E "^-A .* -j $prefix" || true; } | while read -r rule; do
        # -S quotes comments as a shell would: eval splits the rule back into its words.
        eval "$cmd -t $table ${rule/#-A/-D}" 2>/dev/null || true
      done
      for chain in $("$cmd" -t "$table" -S 2>/dev/null | awk -v p="^-N $prefix" '$0 ~ p {print $2}'); do
        "$cmd" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$cmd" -t "$table" -S 2>/dev/null | awk -v p="^-N $prefix" '$0 ~ p {print $2}'); do
        "$cmd" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

cmd_clean() {
  local c pid f m
  # 1. The containers: every process in the pods' cgroups, then containerd's shims for our socket.
  for c in $(controllers); do
    [[ -d "$c$cgroup_root" ]] || continue
    find "$c$cgroup_root" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u | while read -r pid; do
      kill -KILL "$pid" 2>/dev/null || true
    done
  done
  for f in /proc/[0-9]*/cmdline; do
    pid="${f//[^0-9]/}"
    if tr '\0' ' ' 2>/dev/null <"$f" | grep -q "^/usr/bin/containerd-shim-runc-v2 .*-address $sock "; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  sleep 0.5
  # 2. Mounts under the node's state (rootfs overlays, volumes, network namespaces), deepest first.
  if [[ -d "$node" ]]; then
    findmnt -rn -o TARGET | { grep -F "$node/" || true; } | sort -r | while read -r m; do
      umount -l "$m" 2>/dev/null || true
    done
  fi
  # 3. The cgroups, deepest first.
  for c in $(controllers); do
    [[ -d "$c$cgroup_root" ]] && find "$c$cgroup_root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # 4. The network: the pods' host veths (deleting one removes its pair at once; a lazily unmounted
  # namespace would keep it until the kernel frees it), the bridge, the iptables chains, the sysctls.
  for m in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{split($2, a, "@"); print a[1]}'); do
    ip link del "$m" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  drop_chains KUBE-
  drop_chains CNI-
  # kube-router's ipsets (KUBE-SRC-*, KUBE-DST-*, kube-router-*), once no rule uses them.
  ipset list -n 2>/dev/null | { grep -E '^(KUBE-|kube-router-)' || true; } | while read -r m; do
    ipset destroy "$m" 2>/dev/null || true
  done
  if [[ -f "$node/sysctl.orig" ]]; then
    while IFS= read -r f; do sysctl -qw "$f" || true; done <"$node/sysctl.orig"
  fi
  rm -rf "$node"
  # Shims also keep a socket each in /run/containerd/s; those of dead shims are left by containerd.
  echo "node.sh: cleaned"
}

case "${1:-}" in
  run) cmd_run ;;
  clean) cmd_clean ;;
  *) echo "usage: node.sh run|clean" >&2; exit 1 ;;
esac
