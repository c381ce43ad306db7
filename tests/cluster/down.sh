#!/usr/bin/env bash
# Stops everything up.sh started in $SKIFF_CLUSTER_DIR (default /tmp/skiff-cluster): the node,
# kube-scheduler, kube-controller-manager and kube-apiserver first, etcd last. Each was
# started in its own session, so the whole process group gets SIGTERM, then SIGKILL after
# $SKIFF_STOP_GRACE seconds (default 10). Fails if any process is left. Removes the state dir
# unless KEEP_STATE=1.
set -euo pipefail

dir="${SKIFF_CLUSTER_DIR:-/tmp/skiff-cluster}"
grace="${SKIFF_STOP_GRACE:-10}"

if [[ ! -d "$dir" ]]; then
  echo "down.sh: no state dir $dir, nothing to stop"
  exit 0
fi

# Live (non-zombie) processes of process group $1, pids on stdout.
group_members() {
  local pg="$1" f line rest state pgrp
  for f in /proc/[0-9]*/stat; do
    { read -r line <"$f"; } 2>/dev/null || continue   # the process may just have exited
    rest="${line##*) }"          # fields after "(comm)": state ppid pgrp ...
    read -r state _ pgrp _ <<<"$rest"
    [[ "$pgrp" == "$pg" && "$state" != Z ]] && echo "${f//[^0-9]/}"
  done
  return 0
}

# True if pid $1 is one of ours: its environment carries our SKIFF_CLUSTER_DIR.
ours() {
  tr '\0' '\n' <"/proc/$1/environ" 2>/dev/null | grep -qxF "SKIFF_CLUSTER_DIR=$dir"
}

# Names in reverse start order; etcd is stopped in a second round, after its clients.
names=()
if [[ -f "$dir/pids/order" ]]; then
  mapfile -t names < <(tac "$dir/pids/order")
fi
for f in "$dir"/pids/*.pid; do
  [[ -f "$f" ]] || continue
  n="$(basename "$f" .pid)"
  [[ " ${names[*]} " == *" $n "* ]] || names+=("$n")
done

stop_round() { # names...
  local n pid members pgids=() deadline left
  for n in "$@"; do
    [[ -f "$dir/pids/$n.pid" ]] || continue
    pid="$(cat "$dir/pids/$n.pid")"
    members="$(group_members "$pid" | tr '\n' ' ')"
    [[ -n "$members" ]] || continue
    if ! ours "${members%% *}"; then
      echo "down.sh: process group $pid in $n.pid is not ours any more, leaving it alone" >&2
      continue
    fi
    echo "down.sh: stopping $n (process group $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || true
    pgids+=("$pid")
  done
  ((${#pgids[@]})) || return 0
  deadline=$((SECONDS + grace))
  while :; do
    left=()
    for pid in "${pgids[@]}"; do
      [[ -n "$(group_members "$pid")" ]] && left+=("$pid")
    done
    ((${#left[@]})) || return 0
    if ((SECONDS >= deadline)); then
      for pid in "${left[@]}"; do
        echo "down.sh: process group $pid still running after ${grace}s, sending SIGKILL" >&2
        kill -KILL -- "-$pid" 2>/dev/null || true
      done
      sleep 0.5
      return 0
    fi
    sleep 0.2
  done
}

clients=()
for n in "${names[@]}"; do [[ "$n" == etcd ]] || clients+=("$n"); done
stop_round "${clients[@]}"
stop_round etcd

# Check nothing is left behind.
leftover=0
for n in "${names[@]}"; do
  [[ -f "$dir/pids/$n.pid" ]] || continue
  pid="$(cat "$dir/pids/$n.pid")"
  members="$(group_members "$pid" | tr '\n' ' ')"
  if [[ -n "$members" ]] && ours "${members%% *}"; then
    echo "down.sh: error: $n left processes behind: $members" >&2
    leftover=1
  fi
done
((leftover == 0)) || exit 1
rm -f "$dir"/pids/*.pid "$dir/pids/order"

if [[ "${KEEP_STATE:-0}" == 1 ]]; then
  echo "down.sh: stopped; state kept in $dir (logs in $dir/logs)"
else
  rm -rf "$dir"
  echo "down.sh: stopped; removed $dir"
fi
