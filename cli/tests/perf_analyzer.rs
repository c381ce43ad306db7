//! NVIDIA's `perf_analyzer` (the Triton inference benchmark, installed and run by
//! `scripts/perf-analyzer.sh`) works unchanged against Skiff: over HTTP and gRPC, with batches of
//! 8, against a real `skiff-server` and through a real `skiff up` (whose router routes its gRPC
//! calls by the model they name). Each run is short (two concurrency levels, 500 ms windows, any
//! window counts as stable) and must end with a throughput above zero at each level, the server's
//! statistics counting 8 inferences per request, and no error. A perf_analyzer that cannot be
//! installed fails the test.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Up, folder, manifest, repo};

/// The command that runs perf_analyzer (installing it first if needed), one word per element.
fn perf_analyzer() -> Vec<String> {
    let script = repo().join("scripts/perf-analyzer.sh");
    let output = Command::new(&script).arg("--path").output().expect("run scripts/perf-analyzer.sh");
    assert!(
        output.status.success(),
        "scripts/perf-analyzer.sh could not install perf_analyzer ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let words: Vec<String> = String::from_utf8(output.stdout).unwrap().lines().map(str::to_owned).collect();
    assert!(!words.is_empty(), "scripts/perf-analyzer.sh --path printed nothing");
    words
}

/// What one perf_analyzer run measured.
#[derive(Debug)]
struct Run {
    /// (concurrency, inferences per second) from its summary.
    throughput: Vec<(u32, f64)>,
    /// (inference count, successful request count) from each server-side section.
    server_counts: Vec<(u64, u64)>,
}

/// Runs perf_analyzer on model `iris` at `addr` over `protocol` with batches of 8 at concurrency 1
/// and 2, and reads its report; panics with its output when it fails.
fn measure(command: &[String], addr: SocketAddr, protocol: &str) -> Run {
    let started = Instant::now();
    let output = Command::new(&command[0])
        .args(&command[1..])
        .args(["-m", "iris", "-u", &addr.to_string(), "-i", protocol, "-b", "8", "--concurrency-range", "1:2"])
        // Short windows, and any three count as stable: the figures are not what this test checks.
        .args(["--measurement-interval", "500", "--stability-percentage", "1000", "--max-trials", "5"])
        .output()
        .expect("start perf_analyzer");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    eprintln!("perf_analyzer over {protocol} at {addr} ({:?}):\n{text}", started.elapsed());
    assert!(output.status.success(), "perf_analyzer over {protocol} failed ({}):\n{text}", output.status);
    for bad in ["error", "Error", "Failed", "failed", "Thread ["] {
        assert!(!text.contains(bad), "perf_analyzer over {protocol} reported '{bad}':\n{text}");
    }
    let throughput = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("Concurrency: ")?;
            let (concurrency, rest) = rest.split_once(", throughput: ")?;
            Some((concurrency.parse().ok()?, rest.split_whitespace().next()?.parse().ok()?))
        })
        .collect();
    let count = |line: &str, label: &str| line.trim().strip_prefix(label)?.trim().parse::<u64>().ok();
    let lines: Vec<&str> = text.lines().collect();
    let server_counts = lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let inferences = count(line, "Inference count:")?;
            let successes = lines[i..].iter().find_map(|l| count(l, "Successful request count:"))?;
            Some((inferences, successes))
        })
        .collect();
    Run { throughput, server_counts }
}

/// Checks a run: both concurrency levels measured with some throughput.
fn check_throughput(run: &Run, what: &str) {
    let levels: Vec<u32> = run.throughput.iter().map(|(c, _)| *c).collect();
    assert_eq!(levels, [1, 2], "{what}: the summary lists each concurrency: {run:?}");
    for (concurrency, per_second) in &run.throughput {
        assert!(*per_second > 0.0, "{what}: no throughput at concurrency {concurrency}: {run:?}");
    }
}

/// Checks a run against a server: its throughput, and the server-side statistics perf_analyzer
/// read (Triton's statistics extension) count 8 inferences per request (the batch reached the
/// model whole).
fn check(run: &Run, what: &str) {
    check_throughput(run, what);
    assert!(!run.server_counts.is_empty(), "{what}: no server-side statistics: {run:?}");
    for (inferences, requests) in &run.server_counts {
        assert!(*requests > 0, "{what}: the server counted no request: {run:?}");
        assert_eq!(*inferences, 8 * requests, "{what}: batches of 8 counted as 8 inferences each: {run:?}");
    }
}

/// A `skiff-server` child serving `examples/models/iris` on a free loopback port.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start() -> Server {
        let binary = PathBuf::from(env!("CARGO_BIN_EXE_skiff")).with_file_name("skiff-server");
        assert!(binary.exists(), "{} is missing: build the workspace", binary.display());
        let ort = std::env::var("ORT_DYLIB_PATH")
            .unwrap_or_else(|_| repo().join(".ort/onnxruntime/capi/libonnxruntime.so.1.31.1").display().to_string());
        let mut child = Command::new(binary)
            .args(["--bind", "127.0.0.1", "--http-port", "0", "--log-format", "json", "--storage-uri"])
            .arg(format!("file://{}", repo().join("examples/models/iris").display()))
            .env("ORT_DYLIB_PATH", ort)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skiff-server");
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut addr = None;
        while addr.is_none() {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("skiff-server exited or did not log 'listening' within 30 s");
            let log: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if log["fields"]["message"] == "listening" {
                addr = log["fields"]["address"].as_str().and_then(|a| a.parse().ok());
            }
        }
        let server = Server { child, addr: addr.unwrap() };
        while !server.ready() {
            assert!(Instant::now() < deadline, "skiff-server was not ready within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Whether `GET /v2/health/ready` answers 200.
    fn ready(&self) -> bool {
        let Ok(mut stream) = std::net::TcpStream::connect(self.addr) else { return false };
        let mut answer = String::new();
        stream.write_all(b"GET /v2/health/ready HTTP/1.1\r\nhost: skiff\r\nconnection: close\r\n\r\n").is_ok()
            && stream.read_to_string(&mut answer).is_ok()
            && answer.starts_with("HTTP/1.1 200")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn perf_analyzer_measures_skiff_server_over_http_and_grpc_with_batches_of_8() {
    let command = perf_analyzer();
    let server = Server::start();
    for protocol in ["http", "grpc"] {
        check(&measure(&command, server.addr, protocol), &format!("skiff-server over {protocol}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perf_analyzer_measures_skiff_up_through_its_router_over_http_and_grpc() {
    let command = perf_analyzer();
    let dir = folder(&["iris"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let up = Up::start(dir.path(), "");
    up.wait_for("a ready iris replica", Duration::from_secs(60), |status| {
        let services = status["services"].as_array().into_iter().flatten();
        services.filter(|s| s["name"] == "iris").any(|s| s["revisions"][0]["ready"].as_u64().unwrap_or(0) >= 1)
    })
    .await;
    let addr = up.addr;
    let mut before = 0;
    for protocol in ["http", "grpc"] {
        let command = command.clone();
        let run = tokio::task::spawn_blocking(move || measure(&command, addr, protocol)).await.unwrap();
        let what = format!("skiff up over {protocol}");
        // perf_analyzer asks for every model's statistics (`/v2/models/stats`), which the router
        // cannot route to one service: its server-side section is empty. The model's own
        // statistics, through the router, tell whether the batches arrived whole (on each replica).
        check_throughput(&run, &what);
        let url = format!("http://{addr}/v2/models/iris/stats");
        let reply = common::send(http::Method::GET, &url, bytes::Bytes::new(), &[]).await.unwrap();
        assert_eq!(reply.status, 200, "{what}: {}", String::from_utf8_lossy(&reply.body));
        let stats = &reply.json()["model_stats"][0];
        let (inferences, requests) =
            (stats["inference_count"].as_u64(), stats["inference_stats"]["success"]["count"].as_u64());
        let (inferences, requests) = (inferences.unwrap(), requests.unwrap());
        assert!(requests > before, "{what}: the replica counted no new request: {stats}");
        assert_eq!(inferences, 8 * requests, "{what}: batches of 8 counted as 8 inferences each: {stats}");
        before = requests;
    }
}
