#!/usr/bin/env python3
"""Measurements of tests/cluster/bench-cluster.sh (standard library only): the local cluster
(scripts/local-cluster.sh) and standalone mode (`skiff up`) side by side, in one run.

  bench_cluster.py wait-ready   --env ENV                       the warm services ready, the others at zero
  bench_cluster.py cold         --env ENV -n 5                  cold starts, alternating cluster / standalone
  bench_cluster.py warm         --env ENV --seconds 3 --runs 3  skiff-loadgen: router vs direct, both modes
  bench_cluster.py step         --env ENV --mode M              a 0 -> C concurrency step in mode M
  bench_cluster.py report       --env ENV                       the final summary from the results

ENV is a JSON file written by the shell script: the addresses, the cluster dir, the kubeconfig
files, the work dir (results go to <work>/results/<phase>.json) and the settings. Every timestamp
is in milliseconds of the wall clock (time.time()); the control plane, the node (kubelet,
containerd) and its pods run on this machine, so their log timestamps share that clock.

The logs read (the cluster dir is $SKIFF_CLUSTER_DIR):
  logs/kubelet.log          the kubelet's klog lines (its default verbosity: node.sh passes no -v)
  logs/containerd.log       containerd's CRI service: RunPodSandbox, CreateContainer, StartContainer
  node/pod-logs/<ns>_<pod>_<uid>/<container>/N.log
                            the pods' logs as the kubelet keeps them (CRI format: "<RFC 3339> stdout|stderr
                            F|P <line>"); Skiff's components log JSON lines. A deleted pod's logs go
                            with it, so a cold start's model container log is read while it runs.
"""

import argparse
import glob
import http.client
import json
import os
import re
import socket
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

BODY = b'{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}'
INFER = "/v2/models/iris/infer"
NS_WARM, NS_COLD, NS_STEP = "default", "bench-cold", "bench-step"
NAME = "iris"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)")


def now_ms():
    return time.time() * 1000.0


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def fail(msg):
    log(f"FAIL {msg}")
    sys.exit(1)


def ts_ms(text):
    """Milliseconds since the epoch of the first RFC 3339 timestamp in `text`, or None."""
    m = TS.search(text)
    if not m:
        return None
    import calendar

    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = float(m.group(7) or 0.0)
    t = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac
    zone = m.group(8)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        zh, zm = int(zone[1:3]), int(zone[-2:])
        t -= sign * (zh * 3600 + zm * 60)
    return t * 1000.0


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def text_events(path):
    """(ts_ms, line without colours) of every text log line that starts with a timestamp."""
    for line in read_lines(path):
        line = ANSI.sub("", line)
        t = ts_ms(line[:40])
        if t is not None:
            yield t, line


CRI = re.compile(r"^(\S+) (stdout|stderr) ([FP]) (.*)$")


def cri_content(lines):
    """The container's own lines of a CRI-format pod log ("<RFC 3339> <stream> <F|P> <line>"; a line
    split in P parts joined again). Lines that are not CRI-formatted (kubectl logs) pass as they are."""
    part = ""
    for line in lines:
        m = CRI.match(line)
        if not m:
            yield line
            continue
        if m.group(3) == "P":
            part += m.group(4)
            continue
        yield part + m.group(4)
        part = ""


def pod_log_files(env, namespace, pod_prefix, container="*"):
    """The kubelet's log files of the pods of `namespace` whose names start with `pod_prefix`."""
    files = glob.glob(f"{env['cluster_dir']}/node/pod-logs/{namespace}_{pod_prefix}*/{container}/*.log*")
    return sorted(f for f in files if not f.endswith(".gz"))


def component_events(env, component):
    """(ts_ms, fields, target) of the JSON log lines of the skiff-system pods of `component`
    (skiff-controller, skiff-activator), over every pod of it the node has run."""
    for path in pod_log_files(env, "skiff-system", f"{component}-"):
        yield from json_lines(cri_content(read_lines(path)))


def json_lines(lines):
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        t = ts_ms(obj.get("timestamp", ""))
        if t is not None:
            yield t, obj.get("fields", {}), obj.get("target", "")


KLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)\s")


def klog_ms(line):
    """Milliseconds since the epoch of a klog line ("I1128 20:00:02.320929 ..."): the kubelet writes
    this machine's local time, without the year (this year's, or last year's for a later month)."""
    m = KLOG.match(line)
    if not m:
        return None
    mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 6))
    now = time.localtime()
    year = now.tm_year - (1 if mo > now.tm_mon else 0)
    return (time.mktime((year, mo, d, h, mi, sec, 0, 0, -1)) + float(m.group(6))) * 1000.0


GO_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)? ([+-])(\d\d)(\d\d)")


def go_time_ms(text):
    """Milliseconds since the epoch of a Go time.Time's String() ("2026-11-28 19:58:12.3649 +0000 UTC m=+1.2")."""
    m = GO_TIME.search(text or "")
    if not m:
        return None
    import calendar

    y, mo, d, h, mi, sec = (int(m.group(i)) for i in range(1, 7))
    t = calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0)) + float(m.group(7) or 0.0)
    t -= (1 if m.group(8) == "+" else -1) * (int(m.group(9)) * 3600 + int(m.group(10)) * 60)
    return t * 1000.0


def field(line, name):
    m = re.search(r"\b" + re.escape(name) + r"=(\"[^\"]*\"|\S+)", line)
    return m.group(1).strip('"') if m else None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=0, unit=""):
    if x is None:
        return "—"
    text = f"{x:.{digits}f}"
    if text.lstrip("-").strip("0.") == "":
        text = text.lstrip("-")  # no "-0"
    return text + unit


def table(header, rows, left=(0,)):
    """A Markdown table; the columns in `left` are left-aligned, the others right-aligned."""
    aligns = ["---" if i in left else "---:" for i in range(len(header))]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(aligns) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


# --- HTTP -------------------------------------------------------------------------------------------


def request(address, host, path, body=BODY, timeout=120):
    """One POST on a new connection (Connection: close). Returns (status, headers, body, sent_ms,
    first_byte_ms, done_ms): first byte is the first byte of the response on the socket."""
    h, p = address.rsplit(":", 1)
    sock = socket.create_connection((h, int(p)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    try:
        sent = now_ms()
        sock.sendall(head + body)
        first = sock.recv(1)
        first_ms = now_ms()
        chunks = [first]
        while True:
            c = sock.recv(65536)
            if not c:
                break
            chunks.append(c)
        done = now_ms()
    finally:
        sock.close()
    raw = b"".join(chunks)
    head_raw, _, payload = raw.partition(b"\r\n\r\n")
    lines = head_raw.decode(errors="replace").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        payload = dechunk(payload)
    return status, headers, payload, sent, first_ms, done


def dechunk(data):
    out, i = b"", 0
    while i < len(data):
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        size = int(data[i:j].split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[j + 2 : j + 2 + size]
        i = j + 2 + size + 2
    return out


def label_of(payload):
    try:
        answer = json.loads(payload)
        return [o for o in answer["outputs"] if o["name"] == "label"][0]["data"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def get_json(address, path, timeout=5):
    h, p = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(h, int(p), timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return json.loads(resp.read())
    finally:
        conn.close()


# --- standalone (skiff up's admin /status) --------------------------------------------------------------


def sa_revision(env, namespace, status=None):
    status = status or get_json(env["sa_admin"], "/status")
    for s in status.get("services", []):
        if s.get("name") == NAME and s.get("namespace") == namespace and s.get("revisions"):
            return s["revisions"][0]
    return None


def sa_counts(env, namespace):
    try:
        r = sa_revision(env, namespace)
    except (OSError, ValueError, http.client.HTTPException):
        return None
    return (r["desired"], r["ready"]) if r else None


# --- cluster (the API server, with the admin kubeconfig's client certificate) ------------------------------


class Kube:
    def __init__(self, env):
        cfg = json.load(open(env["kubeconfig_json"]))
        cluster = cfg["clusters"][0]["cluster"]
        url = urllib.parse.urlparse(cluster["server"])
        self.host, self.port = url.hostname, url.port or 443
        d = env["work"]
        self.ctx = ssl.create_default_context(cafile=os.path.join(d, "kube-ca.crt"))
        self.ctx.load_cert_chain(os.path.join(d, "kube-client.crt"), os.path.join(d, "kube-client.key"))
        self.local = threading.local()

    def _conn(self, timeout=20):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def get(self, path):
        for attempt in range(3):
            conn = getattr(self.local, "conn", None) or self._conn()
            self.local.conn = conn
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                data = resp.read()
                if resp.status == 404:
                    return None
                if resp.status != 200:
                    raise RuntimeError(f"GET {path}: HTTP {resp.status}: {data[:200]!r}")
                return json.loads(data)
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.2)

    def watch(self, path, on_event, stop):
        """Streams watch events of `path` (a list URL) to on_event(ts_ms, type, object) until `stop`."""
        while not stop.is_set():
            # A daemon thread: it ends with the process; `stop` is checked at each event.
            conn = self._conn(timeout=600)
            try:
                sep = "&" if "?" in path else "?"
                conn.request("GET", f"{path}{sep}watch=1&allowWatchBookmarks=false&timeoutSeconds=300")
                resp = conn.getresponse()
                while not stop.is_set():
                    line = resp.readline()
                    if not line:
                        break
                    t = now_ms()
                    ev = json.loads(line)
                    on_event(t, ev.get("type"), ev.get("object", {}))
            except (OSError, http.client.HTTPException, ValueError):
                time.sleep(0.1)
            finally:
                conn.close()

    def revision(self, namespace):
        """The (one) revision Deployment of InferenceService iris in `namespace`."""
        d = self.get(
            f"/apis/apps/v1/namespaces/{namespace}/deployments?labelSelector="
            + urllib.parse.quote(f"serving.kserve.io/inferenceservice={NAME}")
        )
        items = sorted((d or {}).get("items", []), key=lambda x: x["metadata"]["name"])
        return items[-1]["metadata"]["name"] if items else None

    def pods(self, namespace, revision):
        d = self.get(
            f"/api/v1/namespaces/{namespace}/pods?labelSelector="
            + urllib.parse.quote(f"skiff.dev/revision-name={revision}")
        )
        return (d or {}).get("items", [])

    def spec_replicas(self, namespace, revision):
        d = self.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/{revision}")
        return None if d is None else d.get("spec", {}).get("replicas")

    def at_zero(self, namespace, revision):
        return self.spec_replicas(namespace, revision) == 0 and not self.pods(namespace, revision)

    def ready_pod_ips(self, namespace, revision):
        ips = []
        for p in self.pods(namespace, revision):
            conds = {c["type"]: c["status"] for c in p.get("status", {}).get("conditions", [])}
            if conds.get("Ready") == "True" and p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp"):
                ips.append(p["status"]["podIP"])
        return ips


def wait(what, check, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (OSError, ValueError, RuntimeError, http.client.HTTPException):
            pass
        time.sleep(interval)
    fail(f"timed out after {timeout} s waiting for {what}")


def save(env, phase, data):
    d = os.path.join(env["work"], "results")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{phase}.json"), "w") as f:
        json.dump(data, f, indent=1)


def load(env, phase):
    try:
        return json.load(open(os.path.join(env["work"], "results", f"{phase}.json")))
    except (OSError, ValueError):
        return None


# --- wait-ready --------------------------------------------------------------------------------------------


def cmd_wait_ready(env, args):
    kube = Kube(env)
    wait("the three cluster revisions", lambda: all(kube.revision(ns) for ns in (NS_WARM, NS_COLD, NS_STEP)), 90)
    revs = {ns: kube.revision(ns) for ns in (NS_WARM, NS_COLD, NS_STEP)}
    wait("one ready pod of the cluster's warm revision", lambda: len(kube.ready_pod_ips(NS_WARM, revs[NS_WARM])) == 1, 120)
    wait("the standalone warm replica", lambda: sa_counts(env, NS_WARM) == (1, 1), 60)
    for ns in (NS_COLD, NS_STEP):
        wait(f"cluster {ns}/{revs[ns]} at zero", lambda: kube.at_zero(ns, revs[ns]), 60)
        wait(f"standalone {ns} at zero", lambda: sa_counts(env, ns) == (0, 0), 60)
    # Every route answers, through both routers (the cold ones once each: a first, unmeasured, start).
    for name, addr, host in (
        ("cluster router", env["router"], f"{NAME}.{NS_WARM}.example.com"),
        ("standalone router", env["sa_router"], f"{NAME}.{NS_WARM}.example.com"),
    ):
        status, headers, payload, *_ = request(addr, host, INFER)
        if status != 200 or label_of(payload) != 1:
            fail(f"{name} {addr} answered {status}: {payload[:200]!r}")
    save(env, "revisions", revs)
    log(f"cluster revisions {revs}; warm pod {kube.ready_pod_ips(NS_WARM, revs[NS_WARM])}")


# --- cold starts --------------------------------------------------------------------------------------------

# A cluster cold start's steps, in order: (key, what the step is, where its end's timestamp comes from).
# Each step runs from the previous step's timestamp to its own.
CLUSTER_STEPS = [
    ("decision", "request sent → the autoscaler wrote the Deployment's scale 0→N (activator poke, decide, PATCH)",
     "controller pod's log: \"scaled\""),
    ("pod_created", "→ pod created (kube-controller-manager's ReplicaSet controller)",
     "helper's watch of the pods: ADDED"),
    ("pod_bound", "→ pod bound to the node (kube-scheduler)", "pod watch: spec.nodeName set"),
    ("kubelet_seen", "→ the kubelet has the pod (its watch, admission, the volume manager)",
     "kubelet.log: its first line naming the pod (at -v=0: the volume manager's or the status manager's)"),
    ("sandbox_called", "→ the kubelet asks containerd for the sandbox (volumes set up, SyncPod)",
     "containerd.log: \"RunPodSandbox for\""),
    ("sandbox_ready", "→ pod sandbox ready (pause container by runc, CNI bridge: veth, IP, portmap)",
     "containerd.log: RunPodSandbox \"returns sandbox id\""),
    ("ctr_created", "→ kserve-container created (image's rootfs snapshot, OCI spec)",
     "containerd.log: CreateContainer \"returns container id\""),
    ("container", "→ kserve-container started (runc start)", "containerd.log: StartContainer \"returns successfully\""),
    ("listening", "→ skiff-server listening (process start, ONNX Runtime init)", "model container's log: \"listening\""),
    ("loaded", "→ model loaded, server ready", "model container's log: \"ready: every model is loaded\""),
    ("endpoint", "→ the activator has a ready pod (its own probe of the starting pod, else the EndpointSlice)",
     "activator pod's log (debug): \"a starting pod answered its readiness path\" / EndpointSlice watch"),
    ("first_byte", "→ first byte at the client (the activator forwards, inference, answer)", "the client's socket"),
]

ACTIVATOR_PROBED = "a starting pod answered its readiness path"
ACTIVATOR_SLICE = "EndpointSlice ready endpoint (watch)"


class ColdWatch:
    """Watches the pods and EndpointSlices of a revision; records, per pod, when this process first
    saw it created, bound to a node, Ready, and its endpoint ready in an EndpointSlice (ms, this
    machine's clock: a watch event arrives a few ms after the API server stored the change)."""

    def __init__(self, kube, namespace, revision):
        self.pods = {}  # name -> {"created", "bound", "ready", "slice_ready", "ip"}
        self.stop = threading.Event()
        sel = urllib.parse.quote(f"skiff.dev/revision-name={revision}")
        ssel = urllib.parse.quote(f"kubernetes.io/service-name={revision}")
        for path, cb in (
            (f"/api/v1/namespaces/{namespace}/pods?labelSelector={sel}", self.on_pod),
            (f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices?labelSelector={ssel}", self.on_slice),
        ):
            threading.Thread(target=kube.watch, args=(path, cb, self.stop), daemon=True).start()
        time.sleep(1.0)  # the watches' initial (empty) lists

    def on_pod(self, t, typ, obj):
        name = obj.get("metadata", {}).get("name")
        if not name:
            return
        rec = self.pods.setdefault(name, {"created": t})
        if obj.get("spec", {}).get("nodeName"):
            rec.setdefault("bound", t)
        status = obj.get("status", {})
        if status.get("podIP"):
            rec["ip"] = status["podIP"]
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
            rec.setdefault("ready", t)

    def on_slice(self, t, typ, obj):
        if typ == "DELETED":
            return
        for e in obj.get("endpoints") or []:
            pod = (e.get("targetRef") or {}).get("name")
            if pod and (e.get("conditions") or {}).get("ready") is True:
                self.pods.setdefault(pod, {"created": t}).setdefault("slice_ready", t)

    def started_after(self, t):
        """The name and record of the first pod created at or after t, or (None, None)."""
        new = sorted((r["created"], n) for n, r in list(self.pods.items()) if r["created"] >= t)
        return (new[0][1], self.pods[new[0][1]]) if new else (None, None)


def server_log(env, pod):
    """The model container's log lines of `pod` (bench-cold): the kubelet's file, else kubectl logs."""
    lines = []
    for path in pod_log_files(env, NS_COLD, f"{pod}_", "kserve-container"):
        lines += list(cri_content(read_lines(path)))
    if lines:
        return lines
    p = subprocess.run(
        ["kubectl", "--kubeconfig", os.path.join(env["cluster_dir"], "admin.kubeconfig"), "-n", NS_COLD, "logs",
         "--timestamps", pod, "-c", "kserve-container"],
        capture_output=True, text=True, timeout=30,
    )
    # --timestamps puts the runtime's receipt time first; the line's own timestamp follows it.
    return [line.split(" ", 1)[1] if " " in line else line for line in p.stdout.splitlines()]


def containerd_steps(env, pod):
    """RunPodSandbox (called, returned), CreateContainer and StartContainer (returned) of
    kserve-container in containerd's log, for pod `pod` of bench-cold (attempt 0)."""
    out, sandbox, container = {}, None, None
    meta = f"&PodSandboxMetadata{{Name:{pod},"
    for line in read_lines(os.path.join(env["cluster_dir"], "logs", "containerd.log")):
        if "RunPodSandbox for " in line and meta in line and f"Namespace:{NS_COLD}," in line:
            m = re.search(r'returns sandbox id \\"([0-9a-f]+)\\"', line)
            if m:
                sandbox = m.group(1)
                out["sandbox_ready"] = ts_ms(line)
            else:
                out.setdefault("sandbox_called", ts_ms(line))
        elif sandbox and f'CreateContainer within sandbox \\"{sandbox}\\"' in line and "Name:kserve-container," in line:
            m = re.search(r'returns container id \\"([0-9a-f]+)\\"', line)
            if m:
                container = m.group(1)
                out["ctr_created"] = ts_ms(line)
        elif container and f'StartContainer for \\"{container}\\" returns successfully' in line:
            out["container"] = ts_ms(line)
            break
    return out


def kubelet_steps(env, pod):
    """The kubelet's first line naming the pod, and its "Observed pod startup duration" line's
    observedRunningTime (the kubelet saw every container running) and watchObservedRunningTime."""
    out, key = {}, f'pod="{NS_COLD}/{pod}"'
    for line in read_lines(os.path.join(env["cluster_dir"], "logs", "kubelet.log")):
        if key not in line:
            continue
        t = klog_ms(line)
        if t is None:
            continue
        if "kubelet_seen" not in out:
            out["kubelet_seen"] = t
            m = re.search(r'\] "([^"]{0,60})', line)
            out["kubelet_seen_line"] = m.group(1) if m else line[:60]
        if '"Observed pod startup duration"' in line:
            out["kubelet_running"] = go_time_ms(field(line, "observedRunningTime"))
            out["kubelet_watch_running"] = go_time_ms(field(line, "watchObservedRunningTime"))
            break
    return out


def cluster_breakdown(env, rev, trial):
    key = f"{NS_COLD}/{rev}"
    sent = trial["sent"]
    out = {"sent": sent, "first_byte": trial["first_byte"]}
    scaled = [
        (t, f)
        for t, f, target in component_events(env, "skiff-controller")
        if f.get("message") == "scaled" and f.get("revision") == key and f.get("from") == 0 and t >= sent - 1
    ]
    if scaled:
        t, f = min(scaled, key=lambda x: x[0])
        out["decision"], out["scaled_to"] = t, f.get("to")
    pod, rec = trial.get("pod_name"), trial.get("pod") or {}
    if not pod:
        return out
    out["pod_name"] = pod
    out["pod_created"], out["pod_bound"] = rec.get("created"), rec.get("bound")
    out["pod_ready_api"], out["slice_ready"] = rec.get("ready"), rec.get("slice_ready")
    out.update(kubelet_steps(env, pod))
    out.update(containerd_steps(env, pod))
    for t, line in ((ts_ms(ANSI.sub("", l)[:40]), ANSI.sub("", l)) for l in trial.get("server_log", [])):
        if t is None:
            continue
        if ": listening" in line and "listening" not in out:
            out["listening"] = t
        elif "ready: every model is loaded" in line and "loaded" not in out:
            out["loaded"] = t
        elif ": model loaded" in line:
            out["load_ms"] = float(field(line, "millis") or "nan")
    # The activator (at debug for skiff_dataplane::probe) logs when its own probe of a starting pod
    # answers; else it learnt of the ready pod from the EndpointSlice (the helper's watch of it).
    after = out.get("loaded", sent)
    seen = [
        t
        for t, f, target in component_events(env, "skiff-activator")
        if f.get("message") == ACTIVATOR_PROBED and f.get("revision") == key and t >= after - 1
        and (not rec.get("ip") or str(f.get("addr", "")).startswith(rec["ip"] + ":"))
    ]
    candidates = [(min(seen), ACTIVATOR_PROBED)] if seen else []
    if out.get("slice_ready") is not None:
        candidates.append((out["slice_ready"], ACTIVATOR_SLICE))
    if candidates:
        out["endpoint"], out["endpoint_via"] = min(candidates)
    return out


def standalone_breakdown(env, rev, sent, first):
    key = f"{NS_COLD}/{rev}"
    out = {"sent": sent, "first_byte": first}
    events = list(text_events(env["sa_log"]))
    addr = None
    for t, line in events:
        if t >= sent - 1 and "replica ready" in line and field(line, "revision") == key:
            out["endpoint"] = t
            addr = field(line, "addr")
            millis = float(field(line, "millis") or "nan")
            out["container"] = t - millis  # spawn = ready seen − (spawn → ready seen)
            break
    replica = None
    for t, line in events:
        if t < sent - 1 or field(line, "revision") != key or '{"timestamp"' not in line:
            continue
        m = re.search(r"(\{\"timestamp\".*\})", line)
        try:
            inner = json.loads(m.group(1)) if m else None
        except ValueError:
            inner = None
        if not inner:
            continue
        msg = inner.get("fields", {}).get("message")
        t_inner = ts_ms(inner.get("timestamp", ""))
        if msg == "listening" and replica is None and (addr is None or inner["fields"].get("address") == addr):
            replica = field(line, "replica")
            out["listening"] = t_inner
        elif msg == "ready: every model is loaded" and replica is not None and field(line, "replica") == replica:
            out["loaded"] = t_inner
            break
    return out




STANDALONE_KEYS = ["container", "listening", "loaded", "endpoint", "first_byte"]
# Off the request's path (cluster): (key, from, to, label).
OFF_PATH = [
    ("kubelet_running", "container", "kubelet_running",
     "kserve-container started → the kubelet saw every container running (PLEG relist; kubelet.log"
     " \"Observed pod startup duration\" observedRunningTime)"),
    ("pod_ready_api", "loaded", "pod_ready_api",
     "model loaded → pod Ready in the API (the kubelet's readiness probe, every 1 s, then its status patch; pod watch)"),
    ("slice_ready", "loaded", "slice_ready",
     "model loaded → the pod's endpoint ready in the EndpointSlice (kube-controller-manager; EndpointSlice watch)"),
]


def steps_of(b, mode):
    """Durations (ms) of the steps of one cold start, from its timestamps."""
    names = [s for s, _, _ in CLUSTER_STEPS] if mode == "cluster" else STANDALONE_KEYS
    durations, prev = {}, b["sent"]
    for n in names:
        t = b.get(n)
        if t is None:
            durations[n] = None  # missing from the logs: the next step starts at the last known time
            continue
        durations[n] = t - prev
        prev = t
    if mode == "standalone":
        durations["decision"] = durations.pop("container")
        for n, _, _ in CLUSTER_STEPS:
            durations.setdefault(n, None)
    durations["total"] = b["first_byte"] - b["sent"]
    for key, a, z, _ in OFF_PATH:
        durations[key] = b[z] - b[a] if b.get(a) is not None and b.get(z) is not None else None
    return durations


def cmd_cold(env, args):
    kube = Kube(env)
    revs = load(env, "revisions")
    rev_c = revs[NS_COLD]
    rev_s = sa_revision(env, NS_COLD)["name"]
    host = f"{NAME}.{NS_COLD}.example.com"
    trials = {"cluster": [], "standalone": []}
    watch = ColdWatch(kube, NS_COLD, rev_c)

    def both_at_zero():
        return kube.at_zero(NS_COLD, rev_c) and sa_counts(env, NS_COLD) == (0, 0)

    for i in range(args.n):
        for mode in ("cluster", "standalone"):
            wait("both cold revisions at zero (0 replicas, 0 pods)", both_at_zero, 90, interval=0.25)
            time.sleep(1.0)  # let the EndpointSlice and the routers' views settle at zero
            addr = env["router"] if mode == "cluster" else env["sa_router"]
            status, headers, payload, sent, first, done = request(addr, host, INFER)
            if status != 200 or label_of(payload) != 1:
                fail(f"cold start {i + 1} ({mode}) answered {status}: {payload[:300]!r}")
            trial = {"sent": sent, "first_byte": first, "revision_header": headers.get("x-skiff-revision")}
            log(f"cold {i + 1}/{args.n} {mode}: first byte {first - sent:.0f} ms")
            if mode == "cluster":
                # The pod's log goes when the pod is deleted (scale to zero): read it now, once the
                # watch has seen the pod Ready and its endpoint ready (off the path, after the byte).
                pod, rec = watch.started_after(sent - 1)
                if pod is None:
                    fail(f"cold start {i + 1}: no pod of {NS_COLD}/{rev_c} created after the request")
                deadline = time.monotonic() + 15
                while time.monotonic() < deadline and not ("ready" in rec and "slice_ready" in rec):
                    time.sleep(0.1)
                trial.update(pod_name=pod, pod=dict(rec), server_log=server_log(env, pod))
            trials[mode].append(trial)
    watch.stop.set()
    # The kubelet's, containerd's and the components' logs are read once every trial is over.
    for mode, rev in (("cluster", rev_c), ("standalone", rev_s)):
        for i, t in enumerate(trials[mode]):
            if mode == "cluster":
                b = cluster_breakdown(env, rev, t)
            else:
                b = standalone_breakdown(env, rev, t["sent"], t["first_byte"])
            b["revision_header"] = t["revision_header"]
            trials[mode][i] = b
            s = steps_of(b, mode)
            log(
                f"cold {i + 1}/{args.n} {mode}: first byte {s['total']:.0f} ms ("
                + ", ".join(f"{k} {fmt(v)}" for k, v in s.items() if k != "total")
                + ")"
            )
    save(env, "cold", trials)
    print_cold(trials)


def print_cold(trials):
    print("\n## Cold start from zero: one V2 infer (iris) through the router, time to the first byte\n")
    n = max(len(trials["cluster"]), len(trials["standalone"]))
    rows = []
    for i in range(n):
        row = [str(i + 1)]
        for mode in ("cluster", "standalone"):
            t = trials[mode][i] if i < len(trials[mode]) else None
            row.append(fmt(steps_of(t, mode)["total"]) if t else "—")
        rows.append(row)
    print(table(["trial", "cluster ms", "standalone ms"], rows))
    sc = [steps_of(t, "cluster") for t in trials["cluster"]]
    ss = [steps_of(t, "standalone") for t in trials["standalone"]]
    print(
        "\nMedian of each step (ms; each step from the previous one's timestamp, all on this machine's clock;"
        " a step's median is over the trials, so the medians need not add up to the total's):\n"
    )
    rows = []
    standalone_label = {
        "decision": "request sent → replica process spawned (poke, decide, spawn)",
        "listening": "same",
        "loaded": "same",
        "endpoint": "→ seen ready by skiff up's backend (polls /v2/health/ready every 2 ms)",
        "first_byte": "same",
    }
    for key, label, source in CLUSTER_STEPS:
        rows.append(
            [label, source, fmt(median([s[key] for s in sc])), fmt(median([s[key] for s in ss])),
             standalone_label.get(key, "(the spawn above)" if key == "container" else "")]
        )
    rows.append(
        [
            "**total: request sent → first byte**",
            "",
            fmt(median([s["total"] for s in sc])),
            fmt(median([s["total"] for s in ss])),
            "",
        ]
    )
    print(table(["cluster step", "cluster: from", "cluster ms", "standalone ms", "standalone step"], rows, left=(0, 1, 4)))
    via = [t.get("endpoint_via") for t in trials["cluster"]]
    print(
        f"\nThe activator's own probe found the pod ready first in {sum(v == ACTIVATOR_PROBED for v in via)}"
        f" of {len(via)} cluster trials (else the EndpointSlice had it first)."
    )
    off = [[label, fmt(median([s[key] for s in sc]))] for key, _, _, label in OFF_PATH]
    print("\nOff the request's path (cluster, medians):\n")
    print(table(["", "ms"], off))
    loads = [t.get("load_ms") for t in trials["cluster"] if t.get("load_ms") is not None]
    if loads:
        print(f"\n(cluster: skiff-server's own 'model loaded' millis, median {median(loads):.0f} ms)")


# --- warm path ----------------------------------------------------------------------------------------------

LOADGEN = re.compile(r"([\d.]+) req/s\s+p50 ([\d.]+|NaN) ms\s+p99 ([\d.]+|NaN) ms\s+errors (\d+)")


def loadgen(env, address, path, connections, seconds, warmup):
    cmd = [
        env["loadgen"],
        "--address",
        address,
        "--path",
        path,
        "--body",
        BODY.decode(),
        "-c",
        str(connections),
        "-d",
        str(seconds),
        "--warmup",
        str(warmup),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + warmup + 60)
    m = LOADGEN.search(p.stdout)
    if p.returncode != 0 or not m:
        fail(f"skiff-loadgen {address}{path} -c {connections}: rc {p.returncode}: {p.stdout} {p.stderr[-500:]}")
    num = lambda s: float("nan") if s == "NaN" else float(s)  # noqa: E731
    return {"rps": float(m.group(1)), "p50": num(m.group(2)), "p99": num(m.group(3)), "errors": int(m.group(4))}


def cmd_warm(env, args):
    kube = Kube(env)
    revs = load(env, "revisions")
    ips = kube.ready_pod_ips(NS_WARM, revs[NS_WARM])
    if len(ips) != 1:
        fail(f"the cluster's warm revision has {len(ips)} ready pods, not 1")
    replicas = sa_revision(env, NS_WARM)["replicas"]
    if len(replicas) != 1:
        fail(f"the standalone warm revision has replicas {replicas}, not 1")
    targets = [
        ("cluster", "router", env["router"]),
        ("cluster", "direct", f"{ips[0]}:8080"),
        ("standalone", "router", env["sa_router"]),
        ("standalone", "direct", replicas[0]),
    ]
    # Check each target serves the warm revision (the routers resolve /v2/models/iris by model name:
    # skiff-loadgen sends Host = the address, so the Host route cannot be used; namespace default wins).
    for mode, path_kind, addr in targets:
        status, headers, payload, *_ = request(addr, addr, INFER)
        if status != 200 or label_of(payload) != 1:
            fail(f"{mode} {path_kind} {addr} answered {status}: {payload[:200]!r}")
        if path_kind == "router" and revs[NS_WARM] not in headers.get("x-skiff-revision", ""):
            fail(f"{mode} router sent the request to {headers.get('x-skiff-revision')}, not the warm revision")
    log("warm targets: " + ", ".join(f"{m} {k} {a}" for m, k, a in targets))
    runs = []
    for r in range(args.runs):
        for c in args.connections:
            for mode, kind, addr in targets:
                res = loadgen(env, addr, INFER, c, args.seconds, args.warmup)
                res.update(mode=mode, kind=kind, connections=c, run=r + 1)
                runs.append(res)
                log(f"warm run {r + 1} {mode} {kind} c={c}: {res['rps']:.0f} req/s p50 {res['p50']:.3f} ms p99 {res['p99']:.3f} ms errors {res['errors']}")
    save(env, "warm", {"runs": runs, "targets": targets, "seconds": args.seconds, "connections": args.connections})
    print_warm(load(env, "warm"))


def warm_cells(w):
    cells = {}
    for r in w["runs"]:
        cells.setdefault((r["mode"], r["kind"], r["connections"]), []).append(r)
    return {
        k: {
            "rps": median([x["rps"] for x in v]),
            "p50": median([x["p50"] for x in v]),
            "p99": median([x["p99"] for x in v]),
            "errors": sum(x["errors"] for x in v),
            "rps_all": [round(x["rps"]) for x in v],
        }
        for k, v in cells.items()
    }


def print_warm(w):
    cells = warm_cells(w)
    runs = max(r["run"] for r in w["runs"])
    print(
        f"\n## Warm path: V2 infer (iris), one ready replica; skiff-loadgen, {w['seconds']} s per run after 1 s warm-up,"
        f" {runs} runs alternated; medians\n"
    )
    rows = []
    for c in w["connections"]:
        for mode in ("cluster", "standalone"):
            for kind in ("router", "direct"):
                x = cells[(mode, kind, c)]
                d = cells[(mode, "direct", c)]
                rows.append(
                    [
                        mode,
                        "router → replica" if kind == "router" else "direct to replica",
                        c,
                        fmt(x["rps"]),
                        " / ".join(str(v) for v in x["rps_all"]),
                        fmt(x["p50"], 3),
                        fmt(x["p99"], 3),
                        x["errors"],
                        f"{x['rps'] / d['rps']:.2f}×" if d["rps"] else "—",
                    ]
                )
    print(table(["mode", "path", "conns", "req/s", "runs req/s", "p50 ms", "p99 ms", "errors", "÷ direct"], rows, left=(0, 1)))
    for c in w["connections"]:
        parts = []
        for mode in ("cluster", "standalone"):
            r, d = cells[(mode, "router", c)], cells[(mode, "direct", c)]
            parts.append(f"{mode} router/direct {r['rps'] / d['rps']:.2f}× req/s, +{(r['p50'] - d['p50']) * 1000:.0f} µs p50")
        print(f"- {c} connection(s): " + "; ".join(parts))


# --- 0 -> N step ----------------------------------------------------------------------------------------------


class Timeline:
    def __init__(self):
        self.lock = threading.Lock()
        self.points = []  # (t_ms, desired, ready)
        self.desired = 0
        self.ready = 0

    def set(self, t, desired=None, ready=None):
        with self.lock:
            if desired is not None:
                self.desired = desired
            if ready is not None:
                self.ready = ready
            self.points.append((t, self.desired, self.ready))


def converge(points, t0, t_end):
    pts = [p for p in points if p[0] >= t0 and p[0] <= t_end]
    before = [p for p in points if p[0] < t0]
    if before:
        pts.insert(0, (t0, before[-1][1], before[-1][2]))
    if not pts:
        return {}
    peak = max(p[1] for p in pts)
    t_peak = next((p[0] for p in pts if p[1] == peak), None)
    first_ready = next((p[0] for p in pts if p[2] >= 1), None)
    conv = next((p[0] for p in pts if p[0] >= t_peak and p[2] >= peak), None) if peak else None
    sec = lambda t: None if t is None else (t - t0) / 1000.0  # noqa: E731
    # Did the autoscaler ask for fewer while the load still ran?
    after = [p for p in pts if p[0] >= t_peak]
    low = min(after, key=lambda p: p[1]) if after else None
    drop = next((p[0] for p in after if p[1] < peak), None)
    timeline, last = [], None
    for p in points:
        if t0 - 1000 <= p[0] <= t_end + 3000 and (p[1], p[2]) != last:
            timeline.append([round((p[0] - t0) / 1000.0, 3), p[1], p[2]])
            last = (p[1], p[2])
    return {
        "desired_at_end": after[-1][1] if after else None,
        "lowest_desired_under_load": low[1] if low else None,
        "first_drop_s": sec(drop),
        "timeline": timeline,
        "peak_desired": peak,
        "desired_at_peak_s": sec(t_peak),
        "first_ready_s": sec(first_ready),
        "all_ready_s": sec(conv),
        "max_ready": max(p[2] for p in pts),
    }


def cmd_step(env, args):
    mode = args.mode
    tl = Timeline()
    stop = threading.Event()
    revs = load(env, "revisions")
    path = f"/serving/{NS_STEP}/{NAME}{INFER}"
    if mode == "cluster":
        kube = Kube(env)
        rev = revs[NS_STEP]
        wait(f"cluster {NS_STEP}/{rev} at zero", lambda: kube.at_zero(NS_STEP, rev), 90)
        address = env["router"]

        def on_deploy(t, typ, obj):
            if obj.get("metadata", {}).get("name") == rev:
                tl.set(t, desired=obj.get("spec", {}).get("replicas", 0))

        slices = {}

        def on_slice(t, typ, obj):
            name = obj.get("metadata", {}).get("name")
            if typ == "DELETED":
                slices.pop(name, None)
            else:
                slices[name] = sum(
                    1 for e in obj.get("endpoints") or [] if (e.get("conditions") or {}).get("ready") is True
                )
            tl.set(t, ready=sum(slices.values()))

        sel = urllib.parse.quote(f"kubernetes.io/service-name={rev}")
        fsel = urllib.parse.quote(f"metadata.name={rev}")
        for p, cb in (
            (f"/apis/apps/v1/namespaces/{NS_STEP}/deployments?fieldSelector={fsel}", on_deploy),
            (f"/apis/discovery.k8s.io/v1/namespaces/{NS_STEP}/endpointslices?labelSelector={sel}", on_slice),
        ):
            threading.Thread(target=kube.watch, args=(p, cb, stop), daemon=True).start()
        time.sleep(1.0)  # the watches' initial events
    else:
        wait(f"standalone {NS_STEP} at zero", lambda: sa_counts(env, NS_STEP) == (0, 0), 90)
        address = env["sa_router"]

        def poll():
            while not stop.is_set():
                c = sa_counts(env, NS_STEP)
                if c:
                    tl.set(now_ms(), desired=c[0], ready=c[1])
                time.sleep(0.05)

        threading.Thread(target=poll, daemon=True).start()
        time.sleep(0.3)
    t0 = now_ms()
    res = loadgen(env, address, path, args.concurrency, args.seconds, 0)
    t_end = now_ms()
    time.sleep(1.0)
    stop.set()
    res.update(converge(tl.points, t0, t_end))
    res.update(mode=mode, concurrency=args.concurrency, seconds=args.seconds, ok=round(res["rps"] * args.seconds))
    if mode == "cluster":
        # When the activators' own probes found each new pod ready (earliest over the activators).
        first_seen = {}
        for t, f, target in component_events(env, "skiff-activator"):
            if f.get("message") == ACTIVATOR_PROBED and f.get("revision") == f"{NS_STEP}/{rev}" and t >= t0:
                first_seen[f.get("addr")] = min(t, first_seen.get(f.get("addr"), t))
        times = sorted(first_seen.values())
        peak = res.get("peak_desired") or 0
        res["probe_first_ready_s"] = (times[0] - t0) / 1000.0 if times else None
        res["probe_all_ready_s"] = (times[peak - 1] - t0) / 1000.0 if peak and len(times) >= peak else None
        # The autoscaler's writes of deployments/scale while the load ran ("scaled" from -> to).
        writes = sorted(
            (t, f.get("from"), f.get("to"))
            for t, f, target in component_events(env, "skiff-controller")
            if f.get("message") == "scaled" and f.get("revision") == f"{NS_STEP}/{rev}" and t0 - 1000 <= t <= t_end + 1000
        )
        res["scale_writes"] = [[round((t - t0) / 1000.0, 3), a, b] for t, a, b in writes]
    res["problems"] = problems(env, mode, t0, t_end + 1000)
    for line in res["problems"][:8]:
        log(f"  {mode} log during the step: {line}")
    save(env, f"step-{mode}", res)
    log(
        f"step {mode}: 0 → {args.concurrency}: asked {res.get('peak_desired')} replicas ({fmt(res.get('desired_at_peak_s'), 2)} s),"
        f" lowest ask after that under load {res.get('lowest_desired_under_load')} ({fmt(res.get('first_drop_s'), 2)} s),"
        f" first ready {fmt(res.get('first_ready_s'), 2)} s, all ready {fmt(res.get('all_ready_s'), 2)} s;"
        f" {res['ok']} ok, {res['errors']} failed; p50 {res['p50']:.1f} ms p99 {res['p99']:.1f} ms"
    )


def problems(env, mode, start, end):
    """WARN and ERROR lines logged by the Skiff components during [start, end] (ms)."""
    out = []
    if mode == "cluster":
        for path in pod_log_files(env, "skiff-system", "skiff-"):
            pod = os.path.basename(os.path.dirname(os.path.dirname(path))).split("_")[1]
            for line in cri_content(read_lines(path)):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                t = ts_ms(obj.get("timestamp", ""))
                if t is not None and start <= t <= end and obj.get("level") in ("WARN", "ERROR"):
                    component = re.sub(r"-[0-9a-f]{6,10}-[0-9a-z]{5}$", "", pod)
                    message = re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "<ip:port>", str(obj.get("fields", {}).get("message")))
                    error = re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "<ip:port>", str(obj.get("fields", {}).get("error", "")))
                    out.append(f"{component} {obj.get('level')} {message[:140]}" + (f" ({error[:160]})" if error else ""))
    else:
        for t, line in text_events(env["sa_log"]):
            if start <= t <= end and (" WARN " in line or " ERROR " in line):
                out.append(re.sub(r"^\S+\s+", "", line)[:300])
    counts = {}
    for line in out:
        counts[line] = counts.get(line, 0) + 1
    return [f"{n}× {line}" for line, n in sorted(counts.items(), key=lambda x: -x[1])]


def print_step(env):
    rs = {m: load(env, f"step-{m}") for m in ("cluster", "standalone")}
    if not any(rs.values()):
        return
    any_r = next(r for r in rs.values() if r)
    print(
        f"\n## 0 → {any_r['concurrency']} concurrency step at zero (containerConcurrency 4, maxReplicas 10;"
        f" skiff-loadgen, {any_r['concurrency']} keep-alive connections for {any_r['seconds']} s, through the router)\n"
    )
    rows = []
    for label, key, d in (
        ("replicas the autoscaler asked for (peak)", "peak_desired", 0),
        ("… asked for by (s after the step)", "desired_at_peak_s", 2),
        ("lowest ask after the peak while the load ran", "lowest_desired_under_load", 0),
        ("… first ask below the peak (s after the step)", "first_drop_s", 2),
        ("first replica ready (s)", "first_ready_s", 2),
        ("all asked-for replicas ready (s)", "all_ready_s", 2),
        ("cluster: first ready at the activator's own probe (s)", "probe_first_ready_s", 2),
        ("cluster: all ready at the activator's own probe (s)", "probe_all_ready_s", 2),
        ("requests ok", "ok", 0),
        ("requests failed", "errors", 0),
        ("req/s over the step", "rps", 0),
        ("p50 ms", "p50", 1),
        ("p99 ms", "p99", 1),
    ):
        rows.append([label] + [fmt(rs[m].get(key), d) if rs[m] else "—" for m in ("cluster", "standalone")])
    print(table(["", "cluster", "standalone"], rows))
    print(
        "\n(ready: the cluster counts ready endpoints in the revision's EndpointSlices — the kubelet's"
        " readiness probe, every 1 s, what the router sends to; the activator also sends to pods its own probe found ready."
        " Standalone counts the replicas its backend published.)"
    )
    for m in ("cluster", "standalone"):
        if rs[m] and rs[m].get("timeline"):
            tl = rs[m]["timeline"]
            print(f"\n{m}: (s after the step, asked, ready) " + " ".join(f"({t:g}, {d}, {r})" for t, d, r in tl[:40]))
    if rs["cluster"] and rs["cluster"].get("scale_writes"):
        w = rs["cluster"]["scale_writes"]
        print(
            f"\ncluster: the autoscaler wrote deployments/scale {len(w)} times from 1 s before the step to 1 s after the"
            " load (s after the step: from → to): " + " ".join(f"{t:g}: {a}→{b}" for t, a, b in w[:40])
        )
    for m in ("cluster", "standalone"):
        if rs[m] and rs[m].get("problems"):
            print(f"\n{m}: WARN/ERROR log lines of the Skiff components during the step (count × line):")
            for line in rs[m]["problems"][:8]:
                print(f"    {line}")


# --- report --------------------------------------------------------------------------------------------------


def cmd_report(env, args):
    cold, warm = load(env, "cold"), load(env, "warm")
    print("\n" + "=" * 100)
    print(f"# Cluster vs standalone, one run — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"machine: {os.cpu_count()} CPUs; load average before {env.get('load_before', '?')}, now {open('/proc/loadavg').read().split()[:3]}")
    print(
        "cluster: scripts/local-cluster.sh up (kube-apiserver/controller-manager/scheduler v1.35; the real node:"
        " kubelet v1.35.8, containerd + runc, kube-proxy (iptables), CoreDNS, kube-router; Skiff's images from"
        " deploy/docker with the release binaries; 2 routers behind their Service, 2 activators, 2 controllers); standalone: target/release/skiff up; autoscaler for"
        " both: stable-window 6s, scale-to-zero-grace-period 2s, allow-zero-initial-scale, initial-scale 0"
    )
    if cold:
        print_cold(cold)
    if warm:
        print_warm(warm)
    print_step(env)
    # The one table.
    print("\n## Summary\n")
    rows = []
    if cold:
        c = median([steps_of(t, "cluster")["total"] for t in cold["cluster"]])
        s = median([steps_of(t, "standalone")["total"] for t in cold["standalone"]])
        rows.append([f"cold start, first byte (median of {len(cold['cluster'])})", fmt(c, 0, " ms"), fmt(s, 0, " ms"), f"{c / s:.1f}×" if c and s else "—"])
        def span(trials, a, b):
            return median([t[b] - t[a] if t.get(a) is not None and t.get(b) is not None else None for t in trials])

        for a_key, b_key, label in (
            ("sent", "container", "… request → process started (cluster: scale, pod, bind, kubelet, sandbox, StartContainer)"),
            ("container", "loaded", "… process started → model loaded, server ready"),
            ("loaded", "first_byte", "… model loaded → first byte (activator finds the pod, forwards)"),
        ):
            a, b = span(cold["cluster"], a_key, b_key), span(cold["standalone"], a_key, b_key)
            rows.append([label, fmt(a, 0, " ms"), fmt(b, 0, " ms"), f"{a / b:.1f}×" if a and b else "—"])
    if warm:
        cells = warm_cells(warm)
        for c in warm["connections"]:
            for kind in ("router", "direct"):
                a, b = cells[("cluster", kind, c)], cells[("standalone", kind, c)]
                rows.append([f"warm {kind}, {c} conn: req/s", fmt(a["rps"]), fmt(b["rps"]), f"{a['rps'] / b['rps']:.2f}×"])
                rows.append([f"warm {kind}, {c} conn: p50 ms", fmt(a["p50"], 3), fmt(b["p50"], 3), f"{a['p50'] / b['p50']:.2f}×"])
            ra = cells[("cluster", "router", c)]["rps"] / cells[("cluster", "direct", c)]["rps"]
            rb = cells[("standalone", "router", c)]["rps"] / cells[("standalone", "direct", c)]["rps"]
            rows.append([f"router ÷ direct req/s, {c} conn", f"{ra:.2f}×", f"{rb:.2f}×", ""])
    rs = {m: load(env, f"step-{m}") for m in ("cluster", "standalone")}
    if all(rs.values()):
        a, b = rs["cluster"], rs["standalone"]
        rows.append([f"0 → {a['concurrency']} step: replicas asked for", fmt(a.get("peak_desired")), fmt(b.get("peak_desired")), ""])
        fa, fb = a.get("first_ready_s"), b.get("first_ready_s")
        rows.append(["… first replica ready (cluster: EndpointSlice ready)", fmt(fa, 2, " s"), fmt(fb, 2, " s"), f"{fa / fb:.1f}×" if fa and fb else "—"])
        ta, tb = a.get("all_ready_s"), b.get("all_ready_s")
        rows.append(["… all asked-for replicas ready", fmt(ta, 2, " s"), fmt(tb, 2, " s"), f"{ta / tb:.1f}×" if ta and tb else "—"])
        pa = a.get("probe_all_ready_s")
        rows.append(["… all ready at the activator's own probe (cluster)", fmt(pa, 2, " s"), "", f"{pa / tb:.1f}×" if pa and tb else "—"])
        rows.append(["… requests ok / failed", f"{a['ok']} / {a['errors']}", f"{b['ok']} / {b['errors']}", ""])
        rows.append(["… p50 / p99 ms", f"{a['p50']:.1f} / {a['p99']:.1f}", f"{b['p50']:.1f} / {b['p99']:.1f}", ""])
    print(table(["measurement", "cluster", "standalone", "cluster ÷ standalone"], rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("wait-ready", "cold", "warm", "step", "report"):
        p = sub.add_parser(name)
        p.add_argument("--env", required=True)
        if name == "cold":
            p.add_argument("-n", type=int, default=5)
        if name == "warm":
            p.add_argument("--seconds", type=int, default=3)
            p.add_argument("--warmup", type=int, default=1)
            p.add_argument("--runs", type=int, default=3)
            p.add_argument("--connections", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16])
        if name == "step":
            p.add_argument("--mode", choices=("cluster", "standalone"), required=True)
            p.add_argument("--concurrency", type=int, default=200)
            p.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    env = json.load(open(args.env))
    {"wait-ready": cmd_wait_ready, "cold": cmd_cold, "warm": cmd_warm, "step": cmd_step, "report": cmd_report}[args.cmd](env, args)


if __name__ == "__main__":
    main()
