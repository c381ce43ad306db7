//! `skiff up` as a hostile client and a faulty machine find it: a trickled request head, a Host
//! label of 60 000 dashes, many large bodies at once held at zero, and replicas killed under load,
//! on the router's direct path and behind the activator. Each failure is listed with its reason.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\nactivator:\n  maxPending: 1000\n";

fn service<'a>(status: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    status["services"].as_array()?.iter().find(|s| s["name"] == name)
}

fn ready_replicas(status: &serde_json::Value, name: &str) -> u64 {
    service(status, name).and_then(|s| s["revisions"][0]["ready"].as_u64()).unwrap_or(0)
}

/// The router cuts a client that trickles its request head at the default 20 s header timeout,
/// and answers a Host label past 63 characters with a plain 404 (printed: the time each took).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_cuts_slow_heads_and_refuses_huge_labels() {
    let dir = folder(&["a"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "a", "minReplicas: 1")).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris ready", Duration::from_secs(60), |s| ready_replicas(s, "iris") >= 1).await;

    let host = format!("{}.default.example.com", "-".repeat(60_000));
    let url = format!("http://{}/v2/models/iris/infer", up.addr);
    let started = Instant::now();
    let reply =
        send(http::Method::POST, &url, Bytes::from_static(IRIS_ROW.as_bytes()), &[("host", &host)]).await.unwrap();
    eprintln!("60 000-dash Host label: {} in {:?}", reply.status, started.elapsed());
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    assert!(reply.body.len() < 600, "the answer echoes {} bytes", reply.body.len());

    let mut slow = TcpStream::connect(up.addr).await.unwrap();
    let started = Instant::now();
    let mut cut = None;
    for byte in
        b"POST /v2/models/iris/infer HTTP/1.1\r\nhost: iris.default.example.com\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaa"
    {
        if slow.write_all(&[*byte]).await.is_err() {
            cut = Some(started.elapsed());
            break;
        }
        let mut probe = [0u8; 1];
        if let Ok(read) = tokio::time::timeout(Duration::from_secs(2), slow.read(&mut probe)).await {
            assert_eq!(read.unwrap_or(0), 0, "the router answered a partial head");
            cut = Some(started.elapsed());
            break;
        }
    }
    let cut = cut.expect("the router took the whole trickled head");
    eprintln!("trickled head (a byte every 2 s): cut after {cut:?} (default header timeout 20 s)");
    assert!(cut >= Duration::from_secs(19) && cut <= Duration::from_secs(30), "cut after {cut:?}");
    assert_eq!(up.infer("iris").await.unwrap().status, StatusCode::OK, "still serving");
    assert!(up.stop().success());
}

/// 32 clients each send a 16 MiB body to a service whose replica never becomes ready (it loads
/// for ever, a failure a wait could still mend, so requests are held rather than refused at once),
/// so the activator must hold them: against its byte budget (256 MiB a revision) it holds what
/// fits until the 3 s timeout (504) and refuses the rest at once (503 with the reason). Every
/// client gets an answer, and `skiff up` (router and activator) stays bounded in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_bodies_held_at_zero_stay_within_the_byte_budget() {
    let dir = folder(&[]);
    let script = dir.path().join("slow.py");
    std::fs::copy(repo().join("tests/fixtures/slow_load.py"), &script).unwrap();
    let stuck = python_isvc("broken", &script, r#"{name: LOAD_SECS, value: "100000"}"#)
        .replace("minReplicas: 0\n", "minReplicas: 0\n    timeout: 3\n");
    std::fs::write(dir.path().join("broken.yaml"), stuck).unwrap();
    let up = Up::with_python(dir.path(), CONFIG);
    up.wait_for("the service listed", Duration::from_secs(30), |s| service(s, "broken").is_some()).await;
    let rows = (16 << 20) / 20;
    let mut data = "[1.5,2.5,3.5,4.5],".repeat(rows);
    data.pop();
    let body = Bytes::from(format!(
        r#"{{"inputs":[{{"name":"input","shape":[{rows},4],"datatype":"FP32","data":[{data}]}}]}}"#
    ));
    let baseline = up.peak_rss();
    let url = format!("http://{}/v2/models/broken/infer", up.addr);
    let clients: Vec<_> = (0..32)
        .map(|_| {
            let (url, body) = (url.clone(), body.clone());
            tokio::spawn(async move { send(http::Method::POST, &url, body, &[]).await })
        })
        .collect();
    let (mut held, mut refused) = (0, 0);
    for client in clients {
        let reply = client.await.unwrap().expect("every client gets an answer");
        let message = reply.json()["error"].as_str().unwrap_or_default().to_owned();
        match reply.status {
            StatusCode::GATEWAY_TIMEOUT => held += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert!(message.contains("bytes of request bodies (budget 268435456 bytes)"), "{message}");
                refused += 1;
            }
            other => panic!("{other}: {message}"),
        }
    }
    let peak = up.peak_rss();
    eprintln!(
        "32 × 16 MiB bodies held at zero: {held} held until the timeout (504), {refused} refused (503); \
         skiff up peak RSS {} MiB (before: {} MiB)",
        peak >> 20,
        baseline >> 20
    );
    assert!(held >= 1 && refused >= 1, "{held} held, {refused} refused");
    assert!(peak < 1024 << 20, "skiff up peak RSS {} MiB", peak >> 20);
    assert!(up.stop().success());
}

/// What a load sees when a replica dies: for every failed request, its status and message.
fn failures(outcomes: &[Outcome]) -> Vec<&String> {
    outcomes.iter().filter_map(|o| o.as_ref().err()).collect()
}

fn kill_one_replica(dir: &std::path::Path, model: &str) {
    std::process::Command::new("kill").args(["-KILL", &replica_pid(dir, model)]).status().unwrap();
}

/// The fault test. `direct` (2 replicas with room) is served by the router straight to replicas;
/// `narrow` (1 replica, containerConcurrency 1, 8 clients) is mostly served by the activator,
/// which holds the rest. A replica of each is SIGKILLed under load. The router resends what failed
/// on a reused connection and the activator what a replica dropped before answering, so at most the
/// requests the killed replica held on fresh router connections fail (at most containerConcurrency:
/// 4 for `direct`, 1 for `narrow`), each a JSON 502 that says the upstream failed; the held ones
/// wait for the replacement and succeed. Every failure is printed with its reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_replicas_under_load_fail_only_what_they_held() {
    let dir = folder(&["d", "n"]);
    let path = dir.path();
    std::fs::write(
        path.join("direct.yaml"),
        manifest("direct", "d", "minReplicas: 2\nmaxReplicas: 2\ncontainerConcurrency: 4"),
    )
    .unwrap();
    std::fs::write(
        path.join("narrow.yaml"),
        manifest("narrow", "n", "minReplicas: 1\nmaxReplicas: 1\ncontainerConcurrency: 1"),
    )
    .unwrap();
    let up = Up::start(path, CONFIG);
    up.wait_for("both ready", Duration::from_secs(60), |s| {
        ready_replicas(s, "direct") == 2 && ready_replicas(s, "narrow") == 1
    })
    .await;

    for (name, model, clients, held) in [("direct", "d", 6, 4), ("narrow", "n", 8, 1)] {
        let load = Load::start(&up, name, clients);
        tokio::time::sleep(Duration::from_millis(800)).await;
        kill_one_replica(path, model);
        let want = if name == "direct" { 2 } else { 1 };
        up.wait_for("the replica replaced", Duration::from_secs(30), |s| {
            service(s, name).and_then(|svc| svc["revisions"][0]["restarts"].as_u64()) == Some(1)
                && ready_replicas(s, name) == want
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let outcomes = load.finish().await;
        let failed = failures(&outcomes);
        eprintln!(
            "{name}: SIGKILL of one replica under {clients} clients: {} of {} requests failed",
            failed.len(),
            outcomes.len()
        );
        for failure in &failed {
            eprintln!("  {name}: failed: {failure}");
        }
        assert!(failed.len() <= held, "{name}: {} failed, the killed replica held at most {held}", failed.len());
        for failure in failed {
            assert!(failure.starts_with("502 ") && failure.contains("upstream"), "{name}: {failure}");
        }
    }
    assert!(up.stop().success());
}

/// Ctrl-C reaches `skiff up` and its replicas together: the replicas' exits are expected, so none
/// is reported as crashed or replaced, and nothing is left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_replicas_without_replacing_them() {
    let dir = folder(&["a"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "a", "minReplicas: 2")).unwrap();
    let mut up = Up::start(dir.path(), CONFIG);
    up.wait_for("two ready replicas", Duration::from_secs(60), |s| ready_replicas(s, "iris") == 2).await;
    let logs = std::mem::replace(&mut up.logs, std::sync::mpsc::channel().1);
    let exit = up.interrupt();
    std::thread::sleep(Duration::from_millis(200));
    let logs: Vec<String> = logs.try_iter().collect();
    assert!(exit.success(), "skiff up exit {exit}");
    let unexpected: Vec<&String> = logs.iter().filter(|l| l.contains("exited unexpectedly")).collect();
    assert!(unexpected.is_empty(), "replicas reported as crashed during shutdown: {unexpected:?}");
    let left = std::process::Command::new("pgrep").args(["-f", &dir.path().display().to_string()]).output().unwrap();
    assert!(left.stdout.is_empty(), "replicas left behind: {}", String::from_utf8_lossy(&left.stdout));
}

/// The pid of the replica serving the model folder `models/<model>` of the folder `dir`.
fn replica_pid(dir: &std::path::Path, model: &str) -> String {
    let pattern = format!("{}/./models/{model}", dir.display());
    let pids = std::process::Command::new("pgrep").args(["-f", &pattern]).output().unwrap();
    String::from_utf8(pids.stdout).unwrap().lines().next().expect("a replica").to_owned()
}

/// `kill -9` of a service's only replica: as the kubelet does, the first crash is restarted at
/// once, so the next request is answered by a new replica without waiting a back-off step
/// (printed: how long it waited); the second crash in a row backs off (`restartBackoff`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_comes_back_at_once_and_a_second_crash_backs_off() {
    let backoff = Duration::from_secs(20);
    let config = format!("{CONFIG}replicas:\n  restartBackoff: 20s\n  maxRestartBackoff: 40s\n");
    let dir = folder(&["killed"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "killed", "minReplicas: 1")).unwrap();
    let up = Up::start(dir.path(), &config);
    up.wait_for("iris ready", Duration::from_secs(60), |s| ready_replicas(s, "iris") >= 1).await;
    assert_eq!(up.infer("iris").await.unwrap().status, StatusCode::OK);

    let first = replica_pid(dir.path(), "killed");
    std::process::Command::new("kill").args(["-KILL", &first]).status().unwrap();
    let killed = Instant::now();
    let reply = up.infer("iris").await.unwrap();
    let stall = killed.elapsed();
    eprintln!(
        "kill -9 of the only replica: the next request got {} after {stall:?} (restartBackoff {backoff:?})",
        reply.status
    );
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert!(stall < backoff, "the first restart waited a back-off step: {stall:?}, restartBackoff {backoff:?}");
    // The answer can come before the status is next published: wait for the restart to show.
    let status = up
        .wait_for("the first crash counted", Duration::from_secs(30), |s| {
            service(s, "iris").is_some_and(|svc| svc["revisions"][0]["restarts"] == 1)
        })
        .await;
    let revision = &service(&status, "iris").unwrap()["revisions"][0];
    assert_eq!(
        (revision["restarts"].as_u64(), &revision["backOffMs"]),
        (Some(1), &serde_json::Value::Null),
        "{revision:#}"
    );

    let second = replica_pid(dir.path(), "killed");
    assert_ne!(first, second, "a new replica");
    std::process::Command::new("kill").args(["-KILL", &second]).status().unwrap();
    let status = up
        .wait_for("the second crash backing off", Duration::from_secs(30), |s| {
            service(s, "iris").is_some_and(|svc| svc["revisions"][0]["restarts"] == 2)
        })
        .await;
    let revision = &service(&status, "iris").unwrap()["revisions"][0];
    assert_eq!((revision["backOffMs"].as_u64(), revision["ready"].as_u64()), (Some(20_000), Some(0)), "{revision:#}");
    let events: Vec<(String, String)> = up.events("iris").await.iter().map(reason_and_message).collect();
    assert!(events.contains(&("BackOff".into(), "back-off 20000ms restarting failed replica".into())), "{events:?}");
}
