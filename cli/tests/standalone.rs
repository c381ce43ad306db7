//! Standalone end to end: a real `skiff up` with real `skiff-server` replicas, short autoscaler
//! windows, and load from this test. Scale to zero and from zero, a 500-request burst at zero,
//! canary split / roll back / promote under continuous load, a replica killed under load, and the
//! activator's 503 and 504; a revision that scales on requests per second.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\nactivator:\n  maxPending: 1000\n";

fn service<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["services"].as_array()?.iter().find(|s| s["name"] == name)
}

fn traffic(status: &Value, name: &str) -> Vec<(String, u64)> {
    service(status, name)
        .and_then(|s| s["revisions"].as_array())
        .map(|revs| {
            revs.iter().map(|r| (r["name"].as_str().unwrap().to_owned(), r["percent"].as_u64().unwrap())).collect()
        })
        .unwrap_or_default()
}

fn replicas(status: &Value, name: &str) -> (u64, u64) {
    let revs = service(status, name).and_then(|s| s["revisions"].as_array()).cloned().unwrap_or_default();
    revs.iter().fold((0, 0), |(d, r), rev| (d + rev["desired"].as_u64().unwrap(), r + rev["ready"].as_u64().unwrap()))
}

async fn shares(up: &Up, service: &str, requests: usize) -> (std::collections::BTreeMap<String, usize>, usize) {
    let mut counts = std::collections::BTreeMap::new();
    let mut errors = 0;
    for chunk in 0..requests / 8 {
        let _ = chunk;
        let batch: Vec<_> = (0..8).map(|_| up.infer(service)).collect();
        for reply in futures_all(batch).await {
            match reply {
                Ok(r) if r.status == StatusCode::OK => *counts.entry(r.revision.unwrap_or_default()).or_insert(0) += 1,
                _ => errors += 1,
            }
        }
    }
    (counts, errors)
}

async fn futures_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::with_capacity(futures.len());
    let mut pinned: Vec<_> = futures.into_iter().map(Box::pin).collect();
    for f in pinned.iter_mut() {
        out.push(f.await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_to_burst_canary_and_a_killed_replica() {
    let dir = folder(&["a", "b"]);
    let path = dir.path();
    std::fs::write(
        path.join("iris.yaml"),
        manifest("iris", "a", "minReplicas: 0\nmaxReplicas: 4\ncontainerConcurrency: 4"),
    )
    .unwrap();
    std::fs::write(path.join("steady.yaml"), manifest("steady", "a", "minReplicas: 1\ncontainerConcurrency: 8"))
        .unwrap();
    let up = Up::start(path, CONFIG);
    up.wait_for("both services ready", Duration::from_secs(60), |s| {
        ["iris", "steady"].iter().all(|n| service(s, n).is_some_and(|svc| svc["ready"] == true))
    })
    .await;

    // (e) continuous load on `steady` through everything below.
    let load = Load::start(&up, "steady", 4);

    // (c) idle -> zero after the stable window and the grace period.
    let idle_since = Instant::now();
    up.wait_for("iris at zero", Duration::from_secs(40), |s| replicas(s, "iris") == (0, 0)).await;
    eprintln!("(c) iris scaled to zero {:.1} s after it went idle", idle_since.elapsed().as_secs_f64());

    // (a) the first request at zero succeeds.
    let sent = Instant::now();
    let reply = up.infer("iris").await.unwrap();
    let cold = sent.elapsed();
    assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.json()["outputs"][0]["data"], serde_json::json!([1]));
    let status = up
        .wait_for("the cold start in the status", Duration::from_secs(10), |s| {
            service(s, "iris").is_some_and(|svc| svc["revisions"][0]["coldStartLastMs"].is_u64())
        })
        .await;
    let revision = service(&status, "iris").unwrap()["revisions"][0].clone();
    eprintln!(
        "(a) cold start: first response {:.0} ms after the request; replica spawn-to-ready {} ms; the activator saw {} ms",
        cold.as_secs_f64() * 1000.0,
        revision["lastStartMs"],
        revision["coldStartLastMs"]
    );
    // The cold start is measured inside the client's time, once, by the router and the activator.
    let seen = revision["coldStartLastMs"].as_u64().expect("skiff get shows the cold start");
    assert!(seen <= cold.as_millis() as u64 && revision["coldStartP50Ms"].as_u64().is_some(), "{revision}");
    let metrics = common::send(Method::GET, &format!("http://{}/metrics", up.admin), Bytes::new(), &[]).await.unwrap();
    let metrics = String::from_utf8_lossy(&metrics.body);
    for line in [
        r#"skiff_activator_cold_start_seconds_count{revision="default/iris-predictor-00001"} 1"#,
        r#"skiff_activator_cold_start_ready_seconds_count{revision="default/iris-predictor-00001"} 1"#,
        r#"skiff_router_cold_start_seconds_count{service="default/iris",revision="iris-predictor-00001"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} missing from:\n{metrics}");
    }

    // (b) 500 concurrent clients start at zero and keep sending for 4 s: all succeed, and the
    // replicas rise to the decider's answer, ceil(500 / (4 × 70 %)) capped at maxReplicas 4.
    up.wait_for("iris back at zero", Duration::from_secs(40), |s| replicas(s, "iris") == (0, 0)).await;
    let burst = Load::start(&up, "iris", 500);
    let peak =
        up.wait_for("iris at 4 ready replicas", Duration::from_secs(30), |s| replicas(s, "iris") == (4, 4)).await;
    assert_eq!(replicas(&peak, "iris"), (4, 4));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let outcomes = burst.finish().await;
    let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    eprintln!("(b) 500 clients from zero: {} requests, {} failed; replicas 0 -> 4", outcomes.len(), failures.len());
    assert!(outcomes.len() >= 500 && failures.is_empty(), "failures: {:?}", &failures[..failures.len().min(5)]);

    // (d) canary 20 %, roll back, promote — while `steady` is under load.
    std::fs::write(
        path.join("steady.yaml"),
        manifest("steady", "b", "minReplicas: 1\ncontainerConcurrency: 8\ncanaryTrafficPercent: 20"),
    )
    .unwrap();
    up.wait_for("a 20/80 split", Duration::from_secs(60), |s| {
        traffic(s, "steady") == [("steady-predictor-00002".into(), 20), ("steady-predictor-00001".into(), 80)]
    })
    .await;
    let (counts, errors) = shares(&up, "steady", 2000).await;
    assert_eq!(errors, 0);
    let canary = counts.get("steady-predictor-00002").copied().unwrap_or(0) as f64 / 2000.0;
    eprintln!("(d) canary share over 2000 requests: {:.1} % (counts {counts:?})", canary * 100.0);
    assert!((canary - 0.20).abs() <= 0.04, "canary share {canary} is not 20 % ± 4 %");

    std::fs::write(
        path.join("steady.yaml"),
        manifest("steady", "b", "minReplicas: 1\ncontainerConcurrency: 8\ncanaryTrafficPercent: 0"),
    )
    .unwrap();
    up.wait_for("roll back to 0/100", Duration::from_secs(30), |s| {
        traffic(s, "steady") == [("steady-predictor-00002".into(), 0), ("steady-predictor-00001".into(), 100)]
    })
    .await;
    let (counts, errors) = shares(&up, "steady", 200).await;
    assert_eq!((errors, counts.keys().map(String::as_str).collect::<Vec<_>>()), (0, vec!["steady-predictor-00001"]));

    std::fs::write(path.join("steady.yaml"), manifest("steady", "b", "minReplicas: 1\ncontainerConcurrency: 8"))
        .unwrap();
    up.wait_for("promotion to 100", Duration::from_secs(30), |s| {
        traffic(s, "steady") == [("steady-predictor-00002".into(), 100)]
    })
    .await;
    let (counts, errors) = shares(&up, "steady", 200).await;
    assert_eq!((errors, counts.keys().map(String::as_str).collect::<Vec<_>>()), (0, vec!["steady-predictor-00002"]));

    let outcomes = load.finish().await;
    let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    eprintln!("(e) continuous load: {} requests, {} failed", outcomes.len(), failures.len());
    assert!(failures.is_empty(), "continuous load failures: {failures:?}");

    // (f) a replica killed with SIGKILL under load: at most the requests it held fail.
    let load = Load::start(&up, "steady", 4);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pattern = format!("{}/./models/b", path.display());
    let pids = std::process::Command::new("pgrep").args(["-f", &pattern]).output().unwrap();
    let pid = String::from_utf8(pids.stdout).unwrap().lines().next().expect("a steady replica").to_owned();
    std::process::Command::new("kill").args(["-KILL", &pid]).status().unwrap();
    up.wait_for("the killed replica replaced", Duration::from_secs(30), |s| {
        service(s, "steady").and_then(|svc| svc["revisions"][0]["restarts"].as_u64()) == Some(1)
            && replicas(s, "steady").1 >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outcomes = load.finish().await;
    let failed = outcomes.iter().filter(|o| o.is_err()).count();
    eprintln!("(f) SIGKILL under load: {failed} of {} requests failed (the replica held at most 4)", outcomes.len());
    assert!(failed <= 4, "{failed} requests failed; the killed replica held at most 4 (one per load connection)");

    let exit = up.stop();
    assert!(exit.success(), "skiff up exit {exit}");
    let left = std::process::Command::new("pgrep").args(["-f", &path.display().to_string()]).output().unwrap();
    assert!(left.stdout.is_empty(), "replicas left behind: {}", String::from_utf8_lossy(&left.stdout));
}

/// A revision that never becomes ready (its server loads for ever: a wait could still mend it)
/// has its requests held, up to the activator's `maxPending` (the next gets 503) and for its
/// `timeout` (then 504 naming the revision). A broken model is refused before a replica starts,
/// and its requests are answered 503 with the reason at once (no wait can mend it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_activator_answers_503_when_full_and_504_on_timeout() {
    let dir = folder(&["broken"]);
    std::fs::write(dir.path().join("models/broken/model.onnx"), b"not a model").unwrap();
    std::fs::write(dir.path().join("broken.yaml"), manifest("broken", "broken", "minReplicas: 0\ntimeout: 2")).unwrap();
    let script = dir.path().join("slow.py");
    std::fs::copy(repo().join("tests/fixtures/slow_load.py"), &script).unwrap();
    let stuck = python_isvc("stuck", &script, r#"{name: LOAD_SECS, value: "100000"}"#)
        .replace("minReplicas: 0\n", "minReplicas: 0\n    timeout: 2\n");
    std::fs::write(dir.path().join("stuck.yaml"), stuck).unwrap();
    let config = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\nactivator:\n  maxPending: 3\n";
    let up = Up::with_python(dir.path(), config);
    up.wait_for("the services listed", Duration::from_secs(30), |s| {
        service(s, "broken").is_some() && service(s, "stuck").is_some()
    })
    .await;

    let held: Vec<_> = (0..3)
        .map(|_| {
            let url = format!("http://{}/v2/models/stuck/infer", up.addr);
            tokio::spawn(async move { send(http::Method::POST, &url, IRIS_ROW.into(), &[]).await.unwrap() })
        })
        .collect();
    up.wait_for("3 requests held", Duration::from_secs(10), |s| {
        service(s, "stuck").and_then(|svc| svc["revisions"][0]["queued"].as_u64()) == Some(3)
    })
    .await;
    let refused = up.infer("stuck").await.unwrap();
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&refused.body));
    assert!(refused.json()["error"].as_str().is_some_and(|m| !m.is_empty()));

    for task in held {
        let reply = task.await.unwrap();
        assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT, "{}", String::from_utf8_lossy(&reply.body));
        let message = reply.json()["error"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("stuck-predictor-00001"), "{message}");
    }

    let broken = up.infer("broken").await.unwrap();
    assert_eq!(broken.status, StatusCode::SERVICE_UNAVAILABLE, "{}", String::from_utf8_lossy(&broken.body));
    let message = broken.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("broken-predictor-00001") && message.contains("ModelLoadFailed"), "{message}");
    let status = up.status().await;
    let revision = &service(&status, "broken").unwrap()["revisions"][0];
    assert_eq!(
        revision["lastFailureInfo"]["reason"], "ModelLoadFailed",
        "the broken model is refused before a replica starts, and says why: {revision}"
    );
    assert_eq!(revision["spawns"], 0, "no replica process is started for a model that is not ONNX: {revision}");
    assert!(up.stop().success());
}

/// Two services under the same light load (one connection each, ~100 requests/s, concurrency ≤ 1):
/// the one with `scaleMetric: rps` and `scaleTarget: 5` goes to its maximum of 3 replicas, the one
/// scaling on concurrency (target 100 × 70%) stays at 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rps_revision_scales_on_the_request_rate() {
    let dir = folder(&["a", "b"]);
    let scaling = "minReplicas: 1\nmaxReplicas: 3";
    std::fs::write(
        dir.path().join("fast.yaml"),
        manifest("fast", "a", &format!("{scaling}\nscaleMetric: rps\nscaleTarget: 5")),
    )
    .unwrap();
    std::fs::write(dir.path().join("calm.yaml"), manifest("calm", "b", scaling)).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("both services ready", Duration::from_secs(30), |s| {
        replicas(s, "fast").1 == 1 && replicas(s, "calm").1 == 1
    })
    .await;

    let (fast, calm) = (Load::start(&up, "fast", 1), Load::start(&up, "calm", 1));
    up.wait_for("the rps service at 3 ready replicas", Duration::from_secs(30), |s| replicas(s, "fast") == (3, 3))
        .await;
    let status = up.status().await;
    let outcomes: Vec<Outcome> = [fast.finish().await, calm.finish().await].concat();
    assert_eq!(replicas(&status, "calm"), (1, 1), "concurrency ≤ 1 needs one replica: {status}");
    let failures: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} failed: {:?}",
        failures.len(),
        outcomes.len(),
        &failures[..failures.len().min(3)]
    );
    assert!(up.stop().success());
}
