//! The test ServingRuntime's model server (`tests/fixtures/v2_server.py`) as a real process over
//! real HTTP: it reads its model from `--model_dir` (so a runtime test can tell that `storageUri`
//! arrived), answers KServe's V2 and V1 REST routes, refuses an empty model directory, and stops on
//! SIGTERM. Skipped, with a note, where there is no `python3`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v2_server.py")
}

fn python() -> Option<&'static str> {
    let ok = Command::new("python3").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    ok.is_ok_and(|s| s.success()).then_some("python3")
}

/// A model directory of its own under the target directory.
fn model_dir(name: &str, model_json: Option<&str>) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("v2-server-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(text) = model_json {
        std::fs::write(dir.join("model.json"), text).unwrap();
    }
    dir
}

/// The server process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(python: &str, args: &[&str]) -> Server {
    let mut child = Command::new(python)
        .arg(script())
        .args(["--host", "127.0.0.1", "--http_port", "0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next().expect("the server says where it listens").unwrap();
    let port = line
        .split("http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    // Keep reading, so that later messages reach the test's output rather than a closed pipe.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(|l| eprintln!("{l}")));
    Server { child, port }
}

/// One request over a fresh connection: the status and the JSON body.
fn call(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn wait_ready(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while call(port, "GET", "/v2/health/ready", None).0 != 200 {
        assert!(Instant::now() < deadline, "not ready in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serves_the_model_from_its_model_dir_over_v2_and_v1() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let dir = model_dir("sum", Some(r#"{"scale": 2, "bias": 0.5}"#));
    let server = start(
        python,
        &["--model_name=sum", &format!("--model_dir={}", dir.display()), "--load_delay_secs", "0.3", "--workers=2"],
    );
    let port = server.port;

    assert_eq!(call(port, "GET", "/v2/health/live", None), (200, json!({"live": true})));
    let (status, body) = call(port, "GET", "/v2/models/sum/ready", None);
    assert_eq!((status, &body["ready"]), (503, &json!(false)), "not ready while loading");
    let infer =
        json!({"id": "r1", "inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3, 4]]}]});
    assert_eq!(call(port, "POST", "/v2/models/sum/infer", Some(&infer)).0, 503);
    wait_ready(port);

    let (status, body) = call(port, "POST", "/v2/models/sum/infer", Some(&infer));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["model_name"], "sum");
    assert_eq!(body["id"], "r1");
    assert_eq!(body["outputs"][0]["shape"], json!([2]));
    assert_eq!(body["outputs"][0]["data"], json!([6.5, 14.5]), "scale 2 and bias 0.5 come from model.json");

    let (status, meta) = call(port, "GET", "/v2/models/sum/versions/1", None);
    assert_eq!(status, 200);
    assert_eq!(meta["parameters"]["model_file"], "model.json");
    assert_eq!(meta["parameters"]["sha256"].as_str().map(str::len), Some(64));
    assert_eq!(call(port, "GET", "/v2/models/sum/ready", None).1["ready"], json!(true));

    let (status, body) = call(port, "POST", "/v1/models/sum:predict", Some(&json!({"instances": [[1, 1], [0, 0]]})));
    assert_eq!((status, body), (200, json!({"predictions": [4.5, 0.5]})));
    assert_eq!(call(port, "GET", "/v1/models/sum", None), (200, json!({"name": "sum", "ready": true})));

    let (status, body) = call(port, "POST", "/v2/models/other/infer", Some(&infer));
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("other"), "{body}");
    let bad = json!({"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]});
    let (status, body) = call(port, "POST", "/v2/models/sum/infer", Some(&bad));
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("holds 3 values"), "{body}");
    let bytes = json!({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": ["a"]}]});
    assert_eq!(call(port, "POST", "/v2/models/sum/infer", Some(&bytes)).0, 400);
    assert_eq!(call(port, "GET", "/v3", None).0, 404);
}

#[test]
fn any_file_is_a_model_and_sigterm_stops_the_server() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let dir = model_dir("joblib", None);
    std::fs::write(dir.join("model.joblib"), b"not really a model").unwrap();
    let mut server = start(python, &["--model_name", "iris", "--model_dir", dir.to_str().unwrap()]);
    wait_ready(server.port);
    let one_row = json!({"inputs": [{"name": "x", "shape": [3], "datatype": "INT64", "data": [1, 2, 3]}]});
    let (status, body) = call(server.port, "POST", "/v2/models/iris/infer", Some(&one_row));
    assert_eq!((status, &body["outputs"][0]["data"]), (200, &json!([6.0])));
    assert_eq!(call(server.port, "GET", "/v2/models/iris", None).1["parameters"]["model_file"], "model.joblib");

    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "still running 10 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_empty_model_dir_is_an_error() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let dir = model_dir("empty", None);
    for model_dir in [dir.clone(), dir.join("missing")] {
        let out = Command::new(python)
            .arg(script())
            .args(["--http_port", "0", "--model_dir"])
            .arg(&model_dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("was storageUri downloaded?"), "{stderr}");
    }
}
