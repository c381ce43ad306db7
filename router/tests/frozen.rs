//! A frozen replica (SIGSTOP) through the router: each replica is a real process (a Python HTTP
//! server) under the periodic readiness probe `skiff up` runs ([`skiff_dataplane::readiness`]).
//! Once the frozen one has failed its probe `failure_threshold` times in a row, new requests go to
//! the other replica, or to the activator when none is left; after SIGCONT it passes again and
//! takes requests again. A request already on the frozen replica is not cut: it is answered once
//! the replica runs again. Assertions are on where requests went, never on how long anything took.

mod support;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use skiff_dataplane::endpoints::{Endpoints, Replica};
use skiff_dataplane::readiness::{self, ReadinessProbe};
use support::*;

/// Answers every request 200 with `{"id": <its name>}` (after half a second when the query says
/// `slow`); prints its port.
const REPLICA: &str = r#"
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Replica(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if "slow" in self.path:
            time.sleep(0.5)
        body = json.dumps({"id": sys.argv[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Replica)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A replica process, killed on drop (continued first, should the test fail while it is stopped).
struct ReplicaProcess {
    child: Child,
    addr: SocketAddr,
}

impl ReplicaProcess {
    fn start(name: &str) -> ReplicaProcess {
        use std::io::{BufRead, BufReader};
        let mut child = Command::new("python3")
            .args(["-c", REPLICA, name])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the replica");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], port.trim().parse().expect("the replica prints its port")));
        ReplicaProcess { child, addr }
    }

    fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), signal).unwrap();
    }
}

impl Drop for ReplicaProcess {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `replica`'s probe verdict is `ready` (a liveness bound, not a timing check).
async fn until_probe_says(replica: &Replica, ready: bool) {
    for _ in 0..3000 {
        if replica.probe_ready() == ready {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the probe never said ready={ready} for {}", replica.addr);
}

/// Which upstream answered each of `n` requests, one after another.
async fn answered_by(caller: &Caller, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let (status, body) = caller.post("iris.default.example.com", "/v1/models/iris:predict").await;
        assert_eq!(status, 200, "{body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_replica_gets_no_new_requests_until_it_passes_its_probe_again() {
    let (frozen, steady) = (ReplicaProcess::start("frozen"), ReplicaProcess::start("steady"));
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    // The frozen one is listed first: with both idle, the router picks it.
    let revision = revision(&endpoints, "default/iris-predictor-00001", 0, &[frozen.addr, steady.addr]);
    let probe = ReadinessProbe {
        period: Duration::from_millis(100),
        timeout: Duration::from_millis(300),
        failure_threshold: 3,
        success_threshold: 1,
    };
    let replicas = revision.ready();
    for replica in replicas.iter() {
        tokio::spawn(readiness::watch(Arc::downgrade(replica), "/v2/health/ready", probe));
    }
    let (router, handle) = router(endpoints.clone(), activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let caller = Caller::new(handle.listen_addr());
    assert_eq!(answered_by(&caller, 3).await, ["frozen"; 3], "both in service: the first listed answers");

    // A request on the replica when it freezes (its slot proves where it went).
    let in_flight = tokio::spawn({
        let caller = Caller::new(handle.listen_addr());
        async move { caller.post("iris.default.example.com", "/v1/models/iris:predict?slow").await }
    });
    for _ in 0..3000 {
        if replicas[0].in_flight() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(replicas[0].in_flight(), 1, "the slow request is on the first replica");
    frozen.signal(Signal::SIGSTOP);
    until_probe_says(&replicas[0], false).await;
    assert_eq!(answered_by(&caller, 5).await, ["steady"; 5], "out of service: the other replica answers");

    steady.signal(Signal::SIGSTOP);
    until_probe_says(&replicas[1], false).await;
    assert_eq!(answered_by(&caller, 2).await, ["activator"; 2], "none in service: the activator holds them");

    frozen.signal(Signal::SIGCONT);
    steady.signal(Signal::SIGCONT);
    until_probe_says(&replicas[0], true).await;
    until_probe_says(&replicas[1], true).await;
    let (status, body) = in_flight.await.unwrap();
    assert_eq!((status, body["id"].as_str()), (200, Some("frozen")), "the request in flight kept its own timeout");
    assert_eq!(answered_by(&caller, 3).await, ["frozen"; 3], "it passes again: it takes requests again");
    assert_eq!(activator.seen().len(), 2);
}
