//! What `skiff up`, `skiff get` and `skiff load` tell a person, as real processes: `skiff get`
//! tells two services of one name in two namespaces apart and names its columns once each; a
//! command that fails says why on one line and exits 1, never with a backtrace (`skiff get` with no
//! `skiff up` to answer, `skiff up` on a folder that does not exist); `--admin` names the admin
//! endpoint in every command (`--admin-port` still works); a run is told event by event (a new
//! revision, its canary, a removed service, which is not a revision that lost its traffic); a 4xx
//! is logged at debug with its reason and a replica's start logs no warning; Ctrl-C prints one
//! line, saying SIGINT, and nothing of Pingora's.

mod common;

use std::process::{Command, Output};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

fn skiff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skiff")).args(args).env("RUST_BACKTRACE", "1").output().unwrap()
}

/// `skiff get` with `args`; its stdout.
fn skiff_get(args: &[&str]) -> String {
    let output = skiff(&[&["get"], args].concat());
    assert!(output.status.success(), "skiff get: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits for a line of `lines` that satisfies `check`, up to `limit`; every line read meanwhile
/// goes into `seen`.
fn wait_line(lines: &Receiver<String>, seen: &mut Vec<String>, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if check(&line) {
                    return line;
                }
            }
            Err(_) => panic!("no line for {what}; lines seen:\n{}", seen.join("\n")),
        }
    }
}

fn ready(status: &serde_json::Value, namespace: &str, name: &str) -> bool {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    services.iter().any(|s| s["namespace"] == namespace && s["name"] == name && s["ready"] == true)
}

#[test]
fn a_failing_command_says_why_on_one_line() {
    for flag in ["--admin", "--admin-port"] {
        let port = closed_port().to_string();
        let output = skiff(&["get", flag, &port]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(
            stderr.starts_with(&format!("skiff: no skiff up answers on 127.0.0.1:{port} (is it running, with --admin")),
            "{stderr}"
        );
        assert!(stderr.contains("refused"), "the cause is said: {stderr}");
    }

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder");
    let output = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("up")
        .arg(&missing)
        .args(["--http-port", "0", "--admin", "0"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!("skiff: the manifest folder {}: No such file or directory (os error 2)", missing.display())
    );
    assert!(output.stdout.is_empty(), "nothing served: {}", String::from_utf8_lossy(&output.stdout));

    let output = skiff(&["up", &dir.path().display().to_string(), "--http-port", "0", "--admin", "0.0.0.0:0"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("skiff: --admin 0.0.0.0:0: the admin endpoint") && stderr.contains("loopback"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_told_event_by_event_and_get_tells_namespaces_apart() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    std::fs::write(path.join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let team_a =
        manifest("iris", "iris", "minReplicas: 1").replace("  name: iris\n", "  name: iris\n  namespace: team-a\n");
    std::fs::write(path.join("team-a.yaml"), team_a).unwrap();
    let debug = "info,skiff_http=debug,skiff::standalone::backend=debug,skiff::standalone::controller=debug";
    let mut up = Up::start_with_env(path, CONFIG, &[("RUST_LOG", debug)]);
    let mut logs = Vec::new();
    up.wait_for("both iris ready", Duration::from_secs(60), |s| {
        ready(s, "default", "iris") && ready(s, "team-a", "iris")
    })
    .await;

    // `skiff get`: a namespace column, each column named once, the same by --admin and --admin-port.
    let table = skiff_get(&["--admin", &up.admin.to_string()]);
    assert_eq!(skiff_get(&["--admin-port", &up.admin.port().to_string()]), table);
    let header: Vec<&str> =
        table.lines().next().unwrap().split("   ").map(str::trim).filter(|c| !c.is_empty()).collect();
    assert_eq!(header[..4], ["NAMESPACE", "NAME", "URL", "READY"], "{table}");
    let mut names = header.clone();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), header.len(), "a column name twice: {table}");
    let rows: Vec<Vec<&str>> = table.lines().skip(1).map(|l| l.split_whitespace().collect()).collect();
    let services: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(services, [("default", "iris"), ("team-a", "iris")], "{table}");
    assert!(rows.iter().all(|r| r[7] == "1/1"), "REPLICAS ready/desired: {table}");

    // A request the model refuses is logged at debug, with why.
    let url = format!("http://{}/serving/default/iris/v2/models/iris/infer", up.addr);
    let bad = r#"{"inputs":[{"name":"input","shape":[1,3],"datatype":"FP32","data":[1,2,3]}]}"#;
    let reply = send(Method::POST, &url, Bytes::from_static(bad.as_bytes()), &[]).await.unwrap();
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    let reason = reply.json()["error"].as_str().unwrap().to_owned();
    // The replica's own line (JSON), passed on by `skiff up` at debug.
    let refused = wait_line(&up.logs, &mut logs, "the 400 logged", |l| l.contains(r#""status":400"#));
    assert!(refused.contains(r#""level":"DEBUG","fields":{"message":"request refused""#), "{refused}");
    assert!(refused.contains(&reason), "{refused} (answered {reason})");

    // A canary: its revision and the traffic split, told as events.
    let canary = manifest("iris", "iris", "minReplicas: 1\nmaxReplicas: 3\ncanaryTrafficPercent: 20");
    std::fs::write(path.join("iris.yaml"), canary).unwrap();
    let created = wait_line(&up.logs, &mut logs, "the new revision told", |l| {
        l.contains("skiff::lifecycle") && l.contains("reason=RevisionCreated") && l.contains("iris-predictor-00002")
    });
    assert!(created.contains("namespace=default") && created.contains("service=iris"), "{created}");
    wait_line(&up.logs, &mut logs, "the canary told", |l| {
        l.contains("skiff::lifecycle")
            && l.contains("reason=TrafficChanged")
            && l.contains("traffic: iris-predictor-00002 20% (latest), iris-predictor-00001 80% (prev)")
    });

    // A removed service is told as removed, and its revision is not said to have lost its traffic.
    std::fs::remove_file(path.join("team-a.yaml")).unwrap();
    let deleted = wait_line(&up.logs, &mut logs, "the removal told", |l| {
        l.contains("skiff::lifecycle") && l.contains("reason=Deleted")
    });
    assert!(deleted.contains("namespace=team-a") && deleted.contains("team-a.yaml no longer defines it"), "{deleted}");
    let removing = |l: &str| l.contains("removing the revision") || l.contains("removing it");
    let teardown = match logs.iter().find(|l| removing(l)) {
        Some(line) => line.clone(),
        None => wait_line(&up.logs, &mut logs, "the teardown logged", removing),
    };
    assert!(
        teardown.contains("its service is removed") && teardown.contains("team-a/iris-predictor-00001"),
        "{teardown}"
    );
    let rest = std::mem::replace(&mut up.logs, std::sync::mpsc::channel().1);
    let exit = up.stop();
    std::thread::sleep(Duration::from_millis(200));
    logs.extend(rest.try_iter());
    assert!(exit.success(), "skiff up exit {exit}");
    let lost = logs.iter().filter(|l| l.contains("team-a") && l.contains("no traffic any more")).count();
    assert_eq!(lost, 0, "a removed service's revision is not one that lost its traffic");
    let warned: Vec<&String> = logs.iter().filter(|l| l.contains(r#""level":"WARN""#)).collect();
    assert!(warned.is_empty(), "a replica's start is not a warning: {warned:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_prints_one_line_saying_sigint() {
    let dir = folder(&["iris"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let mut up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris ready", Duration::from_secs(60), |s| ready(s, "default", "iris")).await;
    assert_eq!(up.infer("iris").await.unwrap().status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lines = std::mem::replace(&mut up.lines, std::sync::mpsc::channel().1);
    let logs = std::mem::replace(&mut up.logs, std::sync::mpsc::channel().1);
    let before: Vec<String> = logs.try_iter().chain(lines.try_iter()).collect();
    eprintln!("before Ctrl-C: {before:?}");
    let exit = up.interrupt();
    std::thread::sleep(Duration::from_millis(200));
    let said: Vec<String> = lines.try_iter().collect();
    let logged: Vec<String> = logs.try_iter().collect();
    assert!(exit.success(), "skiff up exit {exit}");
    assert_eq!(said.len(), 1, "one line on Ctrl-C: {said:?}");
    assert!(said[0].contains("SIGINT received") && !said[0].contains("SIGTERM"), "{said:?}");
    assert!(logged.is_empty(), "nothing else, none of Pingora's steps: {logged:?}");
}

/// On a terminal (`script` gives `skiff up` one), each event is one line for a person, and the PID
/// in the first line is the one to stop it with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_each_event_is_a_line() {
    let dir = folder(&["iris"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let on_a_terminal = ["bash", "-c", r#"exec script -qefc "$(printf '%q ' "$0" "$@")" /dev/null"#];
    // Warnings only: stderr shares the terminal, and the first line must be `skiff up`'s own.
    let up = Up::start_under(&on_a_terminal, dir.path(), CONFIG, &[("RUST_LOG", "warn")], &[]);
    let mut seen = Vec::new();
    let event = |reason: &'static str| {
        move |l: &str| {
            let l = l.trim_end_matches('\r');
            let time = l.get(..8).unwrap_or_default();
            time.len() == 8 && time.chars().filter(|c| *c == ':').count() == 2 && l[8..].starts_with(reason)
        }
    };
    let created = wait_line(&up.lines, &mut seen, "RevisionCreated", event(" default/iris RevisionCreated "));
    assert!(
        created.trim_end().ends_with("iris-predictor-00001: the predictor's spec changed: a new revision"),
        "{created}"
    );
    let ready = wait_line(&up.lines, &mut seen, "Ready", event(" default/iris Ready: "));
    assert!(ready.trim_end().ends_with("serving at http://iris.default.example.com"), "{ready}");
    assert!(!seen.iter().any(|l| l.contains("skiff::lifecycle")), "lines, not log events: {seen:?}");

    let pid = up.first.trim_end().strip_suffix(')').and_then(|l| l.rsplit_once("kill ")).map(|(_, pid)| pid.to_owned());
    let pid = pid.unwrap_or_else(|| panic!("no PID in {:?}", up.first));
    assert!(Command::new("kill").args(["-INT", &pid]).status().unwrap().success());
    let stopping = wait_line(&up.lines, &mut seen, "the stop", |l| l.contains("SIGINT received"));
    assert!(stopping.starts_with("skiff up: SIGINT received: draining"), "{stopping}");
    while up.lines.recv_timeout(Duration::from_secs(60)).is_ok() {}
    assert!(up.stop().success());
}
