#!/usr/bin/env python3
"""A small HTTP load client for the cluster end-to-end tests (standard library only).

Every request is a KServe V2 infer of the iris model with a unique "id" in its body; an answer
counts as good when it is a 200 whose JSON echoes that id and whose `label` output is the expected
one. Each request opens its own connection (no keep-alive), so a stale connection is never mistaken
for a failure and each request's router is known. Only connections refused (or reset during the handshake, before anything was sent) are retried, on the
next router address (the router pod is gone or not listening yet): nothing else is retried.

  load.py burst --router IP:PORT --host HOST -n 300 [--concurrency 300]
      n requests, `concurrency` at a time (all at once by default: they start together);
      a JSON summary on stdout; exit 1 if any failed.
  load.py soak --router IP:PORT[,IP:PORT...] --host HOST --workers 8 --stop-file F [--max-seconds 300]
      workers loop until F exists (or max-seconds pass), worker i starting on router i mod count;
      a JSON summary on stdout (failures with time, router and reason); exit 1 if any failed.

The summary: ok, failed, distinct_ids, revisions (x-skiff-revision values -> count), routers
(address -> count), refused_retries, latency_ms (p50, p90, p99, max), failures (up to 50 of them:
{t, router, id, reason}) and the wall time.
"""

import argparse
import http.client
import json
import os
import socket
import sys
import threading
import time

BODY_INPUT = {"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [6.8, 2.8, 4.8, 1.4]}


class Tally:
    """Thread-safe counters of one run."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ok = 0
        self.ids = set()
        self.revisions = {}
        self.routers = {}
        self.refused = 0
        self.latencies = []
        self.failures = []
        self.failed = 0

    def good(self, router, rid, revision, ms):
        with self.lock:
            self.ok += 1
            self.ids.add(rid)
            self.revisions[revision] = self.revisions.get(revision, 0) + 1
            self.routers[router] = self.routers.get(router, 0) + 1
            self.latencies.append(ms)

    def bad(self, router, rid, reason):
        with self.lock:
            self.failed += 1
            if len(self.failures) < 50:
                self.failures.append({"t": round(time.time(), 3), "router": router, "id": rid, "reason": reason})

    def summary(self, started):
        with self.lock:
            lat = sorted(self.latencies)

            def q(p):
                return round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None

            return {
                "ok": self.ok,
                "failed": self.failed,
                "distinct_ids": len(self.ids),
                "revisions": self.revisions,
                "routers": self.routers,
                "refused_retries": self.refused,
                "latency_ms": {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": q(1.0)},
                "failures": self.failures,
                "wall_s": round(time.time() - started, 3),
            }


def one_request(routers, start, host, path, rid, label, timeout, tally):
    """Sends one infer; retries only refused connections (nothing sent), on the next router. Returns the index
    of the router that answered (or last refused) so a worker can stay on it."""
    body = json.dumps({"id": rid, "inputs": [BODY_INPUT]}).encode()
    headers = {"Host": host, "Content-Type": "application/json", "Connection": "close"}
    index = start
    refusals = 0
    t0 = time.monotonic()
    while True:
        router = routers[index % len(routers)]
        addr, port = router.rsplit(":", 1)
        conn = http.client.HTTPConnection(addr, int(port), timeout=timeout)
        try:
            conn.connect()
        except (ConnectionRefusedError, ConnectionResetError):
            # Refused, or reset during the handshake (the router's process died with the connection in
            # its accept queue): nothing was sent, so the request goes to the next router.
            conn.close()
            refusals += 1
            with tally.lock:
                tally.refused += 1
            if refusals > 50 * len(routers):
                tally.bad(router, rid, "connection refused by every router for 5 s")
                return index
            index += 1
            if refusals % len(routers) == 0:
                time.sleep(0.1)
            continue
        except OSError as e:
            conn.close()
            tally.bad(router, rid, f"connect: {type(e).__name__}: {e}")
            return index
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            revision = resp.getheader("x-skiff-revision", "")
        except (OSError, http.client.HTTPException) as e:
            tally.bad(router, rid, f"no response: {type(e).__name__}: {e}")
            return index
        finally:
            conn.close()
        ms = (time.monotonic() - t0) * 1000
        if resp.status != 200:
            tally.bad(router, rid, f"HTTP {resp.status}: {data[:200].decode(errors='replace')}")
            return index
        try:
            answer = json.loads(data)
            got_id = answer.get("id")
            got = [o for o in answer["outputs"] if o["name"] == "label"][0]["data"][0]
        except (ValueError, KeyError, IndexError, TypeError) as e:
            tally.bad(router, rid, f"bad answer ({e}): {data[:200].decode(errors='replace')}")
            return index
        if got_id != rid:
            tally.bad(router, rid, f"answer carries id {got_id!r}, not {rid!r}")
        elif label is not None and got != label:
            tally.bad(router, rid, f"label {got}, not {label}")
        else:
            tally.good(router, rid, revision, ms)
        return index


def burst(args):
    routers = args.router.split(",")
    tally = Tally()
    concurrency = args.concurrency or args.n
    barrier = threading.Barrier(min(concurrency, args.n))
    next_index = iter(range(args.n))
    lock = threading.Lock()
    prefix = f"{args.id_prefix}-{os.getpid()}"

    def worker(w):
        try:
            barrier.wait(timeout=30)
        except threading.BrokenBarrierError:
            pass
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            one_request(routers, w, args.host, args.path, f"{prefix}-{i}", args.label, args.timeout, tally)

    started = time.time()
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(min(concurrency, args.n))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally.summary(started)


def soak(args):
    routers = args.router.split(",")
    tally = Tally()
    deadline = time.monotonic() + args.max_seconds
    prefix = f"{args.id_prefix}-{os.getpid()}"
    counter = iter(range(1 << 62))
    lock = threading.Lock()
    # All workers send their first request together, so a burst is as wide as its worker count even
    # when the machine is busy starting threads.
    barrier = threading.Barrier(args.workers)

    def worker(w):
        index = w
        try:
            barrier.wait(timeout=30)
        except threading.BrokenBarrierError:
            pass
        while not os.path.exists(args.stop_file) and time.monotonic() < deadline:
            with lock:
                i = next(counter)
            index = one_request(routers, index, args.host, args.path, f"{prefix}-{i}", args.label, args.timeout, tally)
            if args.pause_ms:
                time.sleep(args.pause_ms / 1000)

    started = time.time()
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally.summary(started)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("burst", "soak"):
        s = sub.add_parser(name)
        s.add_argument("--router", required=True, help="IP:PORT[,IP:PORT...]")
        s.add_argument("--host", required=True, help="Host header (the InferenceService's URL host)")
        s.add_argument("--path", default="/v2/models/iris/infer")
        s.add_argument("--label", type=int, default=1, help="expected label (-1: do not check)")
        s.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
        s.add_argument("--id-prefix", default=name)
        if name == "burst":
            s.add_argument("-n", type=int, required=True)
            s.add_argument("--concurrency", type=int, default=0, help="default: n (all at once)")
        else:
            s.add_argument("--workers", type=int, default=8)
            s.add_argument("--stop-file", required=True)
            s.add_argument("--max-seconds", type=float, default=300.0)
            s.add_argument("--pause-ms", type=float, default=0.0, help="pause between a worker's requests")
    args = p.parse_args()
    if args.label == -1:
        args.label = None
    socket.setdefaulttimeout(args.timeout)
    summary = burst(args) if args.mode == "burst" else soak(args)
    json.dump(summary, sys.stdout)
    sys.stdout.write("\n")
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
