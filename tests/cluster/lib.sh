# shellcheck shell=bash
# The preamble the cluster end-to-end scripts share. Source it after setting `e2e_name` (the tag of
# each log line); it sets `root` (the checkout), `timeout` (SKIFF_E2E_TIMEOUT, 120 s unless the
# script set one) and `t0`, and defines:
#   log MSG / pass MSG / fail MSG      a timestamped line; fail also exits 1
#   now_ms / secs MS                   wall clock in ms; ms as seconds.mmm
#   wait_for WHAT SECONDS CMD...       poll CMD every 0.25 s until it succeeds, else fail
#   wait_until WHAT CMD...             wait_for with $timeout
#   k ARGS...                          kubectl with a 20 s request timeout
#   e2e_build                          cargo build --workspace, unless SKIFF_E2E_NO_BUILD=1
#   e2e_need_root WHY                  fail with WHY unless running as root
#   e2e_log_tails NAMESPACE...         the last 25 lines of every container of every pod there
#   e2e_container_pid NS POD           the host pid of a pod's first container on the real node
#   e2e_set_autoscaler JSON            inferenceservice-config's autoscaler key set to JSON
#   e2e_node_ip                        this machine's address (the real node's InternalIP)
#   e2e_import_images DIR              every OCI archive in DIR into the real node's containerd (k8s.io)
# and exports SKIFF_LOCAL_TAG=e2e: the scripts on the real node share one set of images
# (tests/cluster/images.sh keeps a set per tag and inputs).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
timeout="${timeout:-${SKIFF_E2E_TIMEOUT:-120}}"
t0=$SECONDS
export SKIFF_LOCAL_TAG="${SKIFF_LOCAL_TAG:-e2e}"

log() { printf '[%s %4ss] %s\n' "${e2e_name:-e2e}" "$((SECONDS - t0))" "$*"; }
pass() { log "ok   $*"; }
fail() {
  log "FAIL $*"
  exit 1
}
now_ms() { local t="${EPOCHREALTIME/./}"; echo "${t:0:-3}"; }
secs() { printf '%d.%03d' "$(($1 / 1000))" "$(($1 % 1000))"; }

wait_for() { # description seconds command...
  local what="$1" deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out waiting for $what"
    sleep 0.25
  done
}
wait_until() { # description command...
  local what="$1"
  shift
  wait_for "$what (${timeout}s)" "$timeout" "$@"
}

k() { kubectl --request-timeout=20s "$@"; }

e2e_build() {
  if [[ "${SKIFF_E2E_NO_BUILD:-0}" != 1 ]]; then
    log "building the workspace (debug)"
    (cd "$root" && cargo build --workspace --quiet)
  fi
}

e2e_need_root() { # why
  [[ "$(id -u)" == 0 ]] || fail "$1"
}

e2e_log_tails() { # namespace...
  local ns pod c
  for ns in "$@"; do
    for pod in $(k -n "$ns" get pods -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
      for c in $(k -n "$ns" get pod "$pod" -o jsonpath='{.spec.containers[*].name}'); do
        echo "---- $ns/$pod/$c (tail) ----"
        k -n "$ns" logs "$pod" -c "$c" --tail=25 2>&1
      done
    done
  done
}

e2e_container_pid() { # namespace pod -> the host pid of its first container's process (containerd)
  local id
  id="$(k -n "$1" get pod "$2" -o jsonpath='{.status.containerStatuses[0].containerID}')"
  id="${id#containerd://}"
  [[ -n "$id" ]] || return 1
  ctr --address "$SKIFF_CLUSTER_DIR/node/containerd.sock" -n k8s.io tasks ls | awk -v id="$id" '$1 == id {print $2}'
}

e2e_import_images() { # folder of OCI archives (tests/cluster/images.sh) -> the node's containerd, as node.sh does
  local tar
  for tar in "$1"/*.tar; do
    [[ -f "$tar" ]] || continue
    ctr --address "$SKIFF_CLUSTER_DIR/node/containerd.sock" -n k8s.io images import --no-unpack=false "$tar" >/dev/null ||
      fail "importing $tar into the node's containerd failed"
  done
}

e2e_set_autoscaler() { # json: Knative's config-autoscaler keys
  k -n skiff-system patch configmap inferenceservice-config --type merge \
    -p "$(python3 -c 'import json,sys; print(json.dumps({"data": {"autoscaler": sys.argv[1]}}))' "$1")" >/dev/null
}

e2e_node_ip() { ip -4 route get 1.1.1.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p'; }
