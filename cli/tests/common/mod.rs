//! Harness for standalone end-to-end tests: a real `skiff up` process over a temporary folder of
//! manifests, real `skiff-server` replicas, and a small HTTP client.

#![allow(dead_code)]

pub mod browser;
pub mod llm;
pub mod lockstep;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The V2 request for one iris row whose label is 1.
pub const IRIS_ROW: &str = r#"{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}"#;

/// A manifest folder with copies of the iris model under `models/<dir>` for each name in `models`.
pub fn folder(models: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for name in models {
        let dir = tmp.path().join("models").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(repo().join("examples/models/iris/model.onnx"), dir.join("model.onnx")).unwrap();
    }
    tmp
}

/// An iris InferenceService manifest; `extra` lines go under `predictor:`.
pub fn manifest(name: &str, model: &str, extra: &str) -> String {
    let extra: String = extra.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\nspec:\n  predictor:\n{extra}    model:\n      modelFormat:\n        name: onnx\n      storageUri: file://./models/{model}\n"
    )
}

/// A running `skiff up`.
pub struct Up {
    child: Child,
    /// The router.
    pub addr: SocketAddr,
    /// The admin endpoint.
    pub admin: SocketAddr,
    /// Its first stdout line (where it serves, its admin endpoint, how to stop it).
    pub first: String,
    /// Its stdout lines after the first.
    pub lines: mpsc::Receiver<String>,
    /// Its log lines (stderr).
    pub logs: mpsc::Receiver<String>,
}

impl Up {
    /// Starts `skiff up dir --config config` on free ports and waits for its first line.
    pub fn start(dir: &Path, config: &str) -> Up {
        Up::start_with_env(dir, config, &[])
    }

    /// [`Up::start`] with extra environment variables.
    pub fn start_with_env(dir: &Path, config: &str, env: &[(&str, &str)]) -> Up {
        Up::start_with(dir, config, env, &[])
    }

    /// [`Up::start`] with extra environment variables and flags.
    /// `skiff up` over `dir` with the image of [`python_isvc`]'s containers mapped to `python3 -u`.
    pub fn with_python(dir: &Path, config: &str) -> Up {
        let map = dir.join("images.json");
        std::fs::write(&map, r#"{"python-http": ["python3", "-u"]}"#).unwrap();
        Up::start_with_env(dir, config, &[("SKIFF_IMAGE_MAP", map.display().to_string().as_str())])
    }

    pub fn start_with(dir: &Path, config: &str, env: &[(&str, &str)], args: &[&str]) -> Up {
        Up::start_under(&[], dir, config, env, args)
    }

    /// [`Up::start_with`] run by `wrapper` (a command whose last argument runs the rest, e.g.
    /// `sh -c 'mount ... && exec "$0" "$@"'`); empty: `skiff up` itself.
    pub fn start_under(wrapper: &[&str], dir: &Path, config: &str, env: &[(&str, &str)], args: &[&str]) -> Up {
        let config_path = dir.join("skiff-config.yml.txt");
        std::fs::write(&config_path, config).unwrap();
        let ort = std::env::var("ORT_DYLIB_PATH")
            .unwrap_or_else(|_| repo().join(".ort/onnxruntime/capi/libonnxruntime.so.1.31.1").display().to_string());
        let server = PathBuf::from(env!("CARGO_BIN_EXE_skiff")).with_file_name("skiff-server");
        assert!(server.exists(), "{} is missing: build the workspace", server.display());
        let skiff = env!("CARGO_BIN_EXE_skiff");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(skiff);
                command
            }
            None => Command::new(skiff),
        };
        let mut child = command
            .arg("up")
            .arg(dir)
            .args(["--http-port", "0", "--admin-port", "0", "--config"])
            .arg(&config_path)
            .arg("--server-bin")
            .arg(&server)
            .args(args)
            .env("ORT_DYLIB_PATH", ort)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, replicas included, so that a failed test leaves nothing behind.
            .process_group(0)
            .spawn()
            .expect("start skiff up");
        let stderr = child.stderr.take().unwrap();
        let (log_tx, logs) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("{line}");
                let _ = log_tx.send(line);
            }
        });
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("[skiff up] {line}");
                let _ = tx.send(line);
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(30)).expect("skiff up printed nothing");
        let url = |marker: &str| -> SocketAddr {
            let rest = &first[first.find(marker).unwrap_or_else(|| panic!("{marker} in {first}")) + marker.len()..];
            rest.split([' ', ';', ')']).next().unwrap().parse().unwrap()
        };
        let (addr, admin) = (url(" on http://"), url("admin http://"));
        Up { child, addr, admin, first, lines, logs }
    }

    /// Sends SIGKILL-free SIGTERM and waits for the exit code.
    pub fn stop(self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        self.signal(&["-TERM", &pid])
    }

    /// Sends SIGINT to `skiff up` and its replicas at once, as Ctrl-C in a terminal does, and
    /// waits for the exit code.
    pub fn interrupt(self) -> std::process::ExitStatus {
        let group = format!("-{}", self.child.id());
        self.signal(&["-INT", "--", &group])
    }

    fn signal(mut self, args: &[&str]) -> std::process::ExitStatus {
        let _ = Command::new("kill").args(args).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "skiff up did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET /status` from the admin endpoint.
    pub async fn status(&self) -> Value {
        let reply = send(http::Method::GET, &format!("http://{}/status", self.admin), Bytes::new(), &[]).await.unwrap();
        serde_json::from_slice(&reply.body).unwrap()
    }

    /// The status of one revision of `service`, if listed.
    pub async fn revision(&self, service: &str, revision: &str) -> Option<Value> {
        let status = self.status().await;
        let services = status["services"].as_array()?.clone();
        let svc = services.into_iter().find(|s| s["name"] == service)?;
        svc["revisions"].as_array()?.iter().find(|r| r["name"] == revision).cloned()
    }

    /// The events `skiff up` recorded for `service` (the web app's API), newest first.
    pub async fn events(&self, service: &str) -> Vec<Value> {
        let url = format!("http://{}/models/api/namespaces/default/inferenceservices/{service}/events", self.admin);
        let reply = send(http::Method::GET, &url, Bytes::new(), &[]).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        serde_json::from_slice(&reply.body).unwrap()
    }

    /// Polls `check` on the status every 100 ms until it holds, up to `limit`.
    pub async fn wait_for(&self, what: &str, limit: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let status = self.status().await;
            if check(&status) {
                return status;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; last status: {status:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The peak resident memory of the `skiff up` process itself (`VmHWM`), in bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }

    /// The resident memory of the `skiff up` process itself now (`VmRSS`), in bytes.
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS in /proc/PID/status");
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
    }

    /// The CPU time (user and system) the `skiff up` process itself has used, from
    /// `/proc/PID/stat` (in the kernel's fixed 100 ticks a second).
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 10)
    }

    /// POSTs the iris row to `/v2/models/<service>/infer`.
    pub async fn infer(&self, service: &str) -> Result<Reply, String> {
        let url = format!("http://{}/v2/models/{service}/infer", self.addr);
        send(http::Method::POST, &url, Bytes::from_static(IRIS_ROW.as_bytes()), &[]).await
    }
}

impl Drop for Up {
    /// Kills `skiff up` and its replicas (its process group) if it is still running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", self.child.id())]).status();
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A response.
pub struct Reply {
    /// Status code.
    pub status: StatusCode,
    /// The revision that answered (`x-skiff-revision`).
    pub revision: Option<String>,
    /// Body.
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A `POST` of `body` (JSON) to `url`, answered with its body unread (for streamed answers).
pub async fn post_json(url: &str, body: &Value) -> http::Response<hyper::body::Incoming> {
    let request = Request::post(url).header("content-type", "application/json");
    client().request(request.body(Full::new(Bytes::from(body.to_string()))).unwrap()).await.unwrap()
}

/// `(desired, ready)` replicas of `service`'s first revision in `skiff up`'s status (`u64::MAX`
/// while it has none).
pub fn replicas_of(status: &Value, service: &str) -> (u64, u64) {
    let revision = revision_of(status, service);
    (revision["desired"].as_u64().unwrap_or(u64::MAX), revision["ready"].as_u64().unwrap_or(u64::MAX))
}

/// `service`'s first revision in `skiff up`'s status (`Null` while it has none).
pub fn revision_of(status: &Value, service: &str) -> Value {
    let found = status["services"].as_array().and_then(|s| s.iter().find(|s| s["name"] == service).cloned());
    found.map(|s| s["revisions"][0].clone()).unwrap_or(Value::Null)
}

/// An event's `(reason, message)`.
pub fn reason_and_message(event: &Value) -> (String, String) {
    (event["reason"].as_str().unwrap().to_owned(), event["message"].as_str().unwrap().to_owned())
}

/// An InferenceService `name` at zero whose custom container runs the Python `script` (with
/// `name` as its argument, and `env`, YAML flow entries such as `{name: A, value: b}`), ready on
/// `GET /health`; [`Up::with_python`] maps its image to `python3 -u`.
pub fn python_isvc(name: &str, script: &Path, env: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: {name}
spec:
  predictor:
    minReplicas: 0
    containers:
      - name: kserve-container
        image: registry.example.com/python-http:3
        args: [{}, {name}]
        env: [{env}]
        ports: [{{containerPort: 8080}}]
        readinessProbe: {{httpGet: {{path: /health, port: 8080}}}}
",
        script.display()
    )
}

/// Sends one request with extra headers.
pub async fn send(method: http::Method, url: &str, body: Bytes, headers: &[(&str, &str)]) -> Result<Reply, String> {
    let mut builder = Request::builder().method(method).uri(url).header("content-type", "application/json");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let response = client().request(builder.body(Full::new(body)).unwrap()).await.map_err(|e| e.to_string())?;
    let revision = response.headers().get("x-skiff-revision").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Reply { status, revision, body })
}

/// One request's outcome: the revision that answered, or what went wrong.
pub type Outcome = Result<Option<String>, String>;

/// Requests that keep going until stopped; records every outcome.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Outcome>>>,
}

impl Load {
    /// `connections` clients sending the iris row to `service` in a loop.
    pub fn start(up: &Up, service: &str, connections: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let url = format!("http://{}/v2/models/{service}/infer", up.addr);
        let tasks = (0..connections)
            .map(|_| {
                let (stop, url) = (stop.clone(), url.clone());
                tokio::spawn(async move {
                    let mut outcomes = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let reply = send(http::Method::POST, &url, IRIS_ROW.into(), &[]).await;
                        outcomes.push(match reply {
                            Ok(r) if r.status == StatusCode::OK => Ok(r.revision),
                            Ok(r) => Err(format!("{} {}", r.status, String::from_utf8_lossy(&r.body))),
                            Err(e) => Err(e),
                        });
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    outcomes
                })
            })
            .collect();
        Load { stop, tasks }
    }

    /// Stops the clients and returns every outcome.
    pub async fn finish(self) -> Vec<Outcome> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for task in self.tasks {
            all.extend(task.await.unwrap());
        }
        all
    }
}

/// A transformer on KServe's SDK: millimetres in, centimetres to the predictor.
pub const TRANSFORMER: &str = r#"
from kserve import Model, ModelServer, model_server

class Millimetres(Model):
    def __init__(self, name):
        super().__init__(name)
        self.ready = True

    def preprocess(self, payload, headers=None):
        return {"instances": [[value / 10 for value in row] for row in payload["instances"]]}

if __name__ == "__main__":
    args, _ = model_server.parser.parse_known_args()
    ModelServer().start([Millimetres(args.model_name)])
"#;

/// The Python of the `kserve` SDK's virtual environment.
pub fn kserve_python() -> String {
    let python = repo().join(".bench/kserve-venv/bin/python");
    assert!(python.is_file(), "{} is missing: run `PEERS=kserve bench/peers/setup.sh`", python.display());
    python.display().to_string()
}

/// A client of the models web app of a `skiff up`, as its own page is one: the session and CSRF
/// cookies from a first `GET`, then the token in `X-XSRF-TOKEN` on every change.
pub struct WebApp {
    admin: SocketAddr,
    cookie: String,
    token: String,
}

impl WebApp {
    /// Opens the app of the `skiff up` whose admin endpoint is `admin`.
    pub async fn open(admin: SocketAddr) -> WebApp {
        let request = Request::get(format!("http://{admin}/models/")).body(Full::new(Bytes::new())).unwrap();
        let response = client().request(request).await.unwrap();
        let cookies: Vec<String> = response
            .headers()
            .get_all(http::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok()?.split(';').next().map(str::to_owned))
            .collect();
        let token =
            cookies.iter().find_map(|c| c.strip_prefix("XSRF-TOKEN=")).expect("an XSRF-TOKEN cookie").to_owned();
        WebApp { admin, cookie: cookies.join("; "), token }
    }

    /// `method` with the JSON `body` on the InferenceService API's `path` in `default`
    /// (`iris`, `iris/rollback`).
    pub async fn call(&self, method: http::Method, path: &str, body: &Value) -> Reply {
        let url = format!("http://{}/models/api/namespaces/default/inferenceservices/{path}", self.admin);
        let body = Bytes::from(serde_json::to_vec(body).unwrap());
        send(method, &url, body, &[("cookie", &self.cookie), ("x-xsrf-token", &self.token)]).await.unwrap()
    }
}
