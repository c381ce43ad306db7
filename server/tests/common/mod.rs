//! Test harness: runs the real `skiff-server` binary on a free loopback port and talks HTTP to it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// ONNX Runtime's library: `ORT_DYLIB_PATH`, or where `scripts/setup.sh` puts it.
pub fn ort_dylib() -> PathBuf {
    std::env::var_os("ORT_DYLIB_PATH").map(PathBuf::from).unwrap_or_else(|| {
        let path = repo().join(".ort/onnxruntime/capi/libonnxruntime.so.1.31.1");
        assert!(path.exists(), "{} is missing: run scripts/setup.sh", path.display());
        path
    })
}

/// A running `skiff-server` child process.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    logs: mpsc::Receiver<String>,
}

impl Server {
    /// Starts the server with `args` (plus a loopback bind, port 0 and JSON logs) and waits until it listens.
    pub fn start(args: &[&str]) -> Server {
        Server::start_with_ort(args, Some(ort_dylib()))
    }

    /// [`Server::start`] with `ORT_DYLIB_PATH` set to `ort`, or unset when `None`.
    pub fn start_with_ort(args: &[&str], ort: Option<PathBuf>) -> Server {
        let mut command = Command::new(env!("CARGO_BIN_EXE_skiff-server"));
        match ort {
            Some(path) => command.env("ORT_DYLIB_PATH", path),
            None => command.env_remove("ORT_DYLIB_PATH"),
        };
        let child = command
            .args(["--bind", "127.0.0.1", "--http-port", "0", "--log-format", "json"])
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skiff-server");
        let (tx, logs) = mpsc::channel();
        let mut server = Server { child, addr: SocketAddr::from(([0, 0, 0, 0], 0)), logs };
        let stderr = server.child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[skiff-server] {line}");
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = server
                .logs
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("skiff-server exited or did not log 'listening' within 20 s");
            let Ok(log) = serde_json::from_str::<Value>(&line) else { continue };
            if log["fields"]["message"] == "listening" {
                server.addr = log["fields"]["address"].as_str().unwrap().parse().unwrap();
                return server;
            }
        }
    }

    /// Starts the server and waits until `/v2/health/ready` answers 200.
    pub async fn start_ready(args: &[&str]) -> Server {
        let server = Server::start(args);
        server.wait_ready().await;
        server
    }

    /// Polls readiness for up to 30 s.
    pub async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok((StatusCode::OK, _)) = try_get(&self.url("/v2/health/ready")).await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("skiff-server did not become ready within 30 s");
    }

    /// A full URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "skiff-server still running after {timeout:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process's peak resident memory so far (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
        let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kib * 1024
    }

    /// Log lines received so far.
    pub fn drain_logs(&self) -> Vec<String> {
        self.logs.try_iter().collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response: status, headers, body.
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends one request.
pub async fn send(method: Method, url: &str, body: impl Into<Bytes>) -> Reply {
    try_send(method, url, body.into()).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

async fn try_send(method: Method, url: &str, body: Bytes) -> Result<Reply, String> {
    let request = Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap();
    let response = client().request(request).await.map_err(|e| e.to_string())?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Reply { status: parts.status, headers: parts.headers, body })
}

async fn try_get(url: &str) -> Result<(StatusCode, Bytes), String> {
    try_send(Method::GET, url, Bytes::new()).await.map(|r| (r.status, r.body))
}

/// GET, returning status and JSON body.
pub async fn get(url: &str) -> (StatusCode, Value) {
    let reply = send(Method::GET, url, Bytes::new()).await;
    (reply.status, reply.json())
}

/// POST a JSON value, returning status and JSON body.
pub async fn post(url: &str, body: &Value) -> (StatusCode, Value) {
    let reply = send(Method::POST, url, serde_json::to_vec(body).unwrap()).await;
    (reply.status, reply.json())
}

/// The expectation file of a fixture model (`tests/fixtures/expected/<model>.json`).
pub fn expectations(model: &str) -> Value {
    let path = repo().join(format!("tests/fixtures/expected/{model}.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// Asserts two numbers agree within 1e-5, relative for large magnitudes.
pub fn assert_close(got: f64, want: f64, context: &str) {
    let tolerance = 1e-5 * want.abs().max(1.0);
    assert!((got - want).abs() <= tolerance, "{context}: got {got}, want {want}");
}

/// Asserts V2 outputs match expected ones by name: datatype and shape exactly, data within 1e-5
/// for floating-point types and exactly for the others.
pub fn assert_outputs_match(got: &Value, want: &Value, context: &str) {
    let got = got.as_array().unwrap_or_else(|| panic!("{context}: outputs missing"));
    let want = want.as_array().unwrap();
    assert_eq!(got.len(), want.len(), "{context}: number of outputs");
    for expected in want {
        let name = expected["name"].as_str().unwrap();
        let actual = got.iter().find(|o| o["name"] == name).unwrap_or_else(|| panic!("{context}: no output {name}"));
        assert_eq!(actual["datatype"], expected["datatype"], "{context}: datatype of {name}");
        assert_eq!(actual["shape"], expected["shape"], "{context}: shape of {name}");
        assert_data_match(
            &actual["data"],
            &expected["data"],
            expected["datatype"].as_str().unwrap(),
            &format!("{context}: {name}"),
        );
    }
}

/// Compares flat data arrays as [`assert_outputs_match`] does.
pub fn assert_data_match(got: &Value, want: &Value, datatype: &str, context: &str) {
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(got.len(), want.len(), "{context}: element count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if datatype.starts_with("FP") || datatype == "BF16" {
            assert_close(g.as_f64().unwrap(), w.as_f64().unwrap(), &format!("{context}[{i}]"));
        } else {
            assert_eq!(g, w, "{context}[{i}]");
        }
    }
}
