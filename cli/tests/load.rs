//! `skiff load` end to end, as a user runs it: the real binary against a real `skiff up` with
//! real `skiff-server` replicas. A burst at zero reports the replica starts `skiff up` itself
//! recorded as events, counts as cold starts the requests whose answers say they met one, rates
//! its requests over the time under load, and its HTML report shows its charts in headless
//! Chromium, the wait for zero compressed (screenshot under `target/web-screenshots/load-report/`,
//! and `docs/images/load-report.png` when `SKIFF_SCREENSHOTS=docs/images`); a cold start from a store (MinIO, started by the test)
//! reports its fetch, downloaded into the empty cache then read from it; an open-loop rate is
//! kept; thresholds and an unreachable target set the exit code.

mod common;
#[path = "../../fetch/tests/common/stores.rs"]
mod stores;

use std::time::Duration;

use common::browser::Browser;
use common::{IRIS_ROW, Up, folder, manifest};
use serde_json::Value;

/// Revisions start at zero; short autoscaler windows so that a cycle's replicas go back to zero
/// within seconds.
const CONFIG: &str = "autoscaler:\n  allow-zero-initial-scale: \"true\"\n  initial-scale: \"0\"\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\nactivator:\n  maxPending: 1000\n";

/// Runs `skiff load ARGS`; returns its exit code and stdout.
async fn load(args: &[&str]) -> (i32, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_skiff"))
        .arg("load")
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .expect("run skiff load");
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `(from, to)` of a `ReplicasReady` event ("ready replicas: 0 → 3").
fn ready_change(event: &Value) -> Option<(u64, u64)> {
    if event["reason"] != "ReplicasReady" {
        return None;
    }
    let (from, to) = event["message"].as_str()?.strip_prefix("ready replicas: ")?.split_once(" → ")?;
    Some((from.parse().ok()?, to.parse().ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_at_zero_reports_the_replica_starts_skiff_up_recorded_and_charts_them() {
    let dir = folder(&["iris"]);
    let spec = "minReplicas: 0\nmaxReplicas: 4\ncontainerConcurrency: 4";
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", spec)).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris listed at zero", Duration::from_secs(60), |s| {
        s["services"][0]["revisions"][0]["desired"] == 0 && s["services"][0]["ready"] == true
    })
    .await;
    let before = up.events("iris").await.len();

    let report = dir.path().join("report.html");
    let url = format!("http://{}/v2/models/iris/infer", up.addr);
    let admin = up.admin.to_string();
    let mut args = vec![url.as_str(), "-b", IRIS_ROW, "--admin", &admin, "--json", "-o", report.to_str().unwrap()];
    args.extend(["--burst", "20", "--idle", "zero", "--cycles", "2", "--settle", "2s", "-d", "30s"]);
    let (code, stdout) = load(&args).await;
    assert_eq!(code, 0, "{stdout}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((summary["requests"].as_u64(), summary["ok"].as_u64()), (Some(40), Some(40)), "{summary:#}");

    // The replica starts skiff up recorded while the load ran, from its own events.
    let all = up.events("iris").await;
    let changes: Vec<(u64, u64)> = all[..all.len() - before].iter().filter_map(ready_change).collect();
    let started: u64 = changes.iter().map(|(from, to)| to.saturating_sub(*from)).sum();
    let from_zero = changes.iter().filter(|(from, to)| *from == 0 && *to > 0).count() as u64;
    let cold = &summary["coldStarts"];
    eprintln!("skiff load saw {cold}; skiff up's events: {changes:?}");
    assert!(started > 0, "the bursts started replicas: {changes:?}");
    assert_eq!(cold["replicaStarts"].as_u64(), Some(started), "{cold}");
    assert_eq!(cold["fromZero"].as_u64(), Some(from_zero), "{cold}");
    assert_eq!(from_zero, 2, "each cycle began at zero: {changes:?}");
    // Every request met a cold start, as its answer said (the activator held it), and counts at zero.
    assert_eq!(cold["metZero"]["count"].as_u64(), Some(40), "every request met a cold start: {cold}");
    assert_eq!(cold["held"]["count"].as_u64(), Some(40), "{cold}");
    assert!(cold["held"]["p50Ms"].as_f64() <= cold["metZero"]["p50Ms"].as_f64(), "held within its latency: {cold}");
    let phases: Vec<(String, u64)> = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["phase"].as_str().unwrap().to_owned(), p["count"].as_u64().unwrap()))
        .collect();
    let expected = [("atZero", 40), ("scaling", 0), ("steady", 0)].map(|(p, n)| (p.to_owned(), n));
    assert_eq!(phases, expected, "{summary:#}");
    // Rates are over the time under load: first request to last answer, not the wait to settle.
    let cycles = summary["cycleResults"].as_array().unwrap();
    let under_load: f64 = cycles.iter().map(|c| c["loadedS"].as_f64().unwrap() - c["startS"].as_f64().unwrap()).sum();
    let cycled: f64 = cycles.iter().map(|c| c["endS"].as_f64().unwrap() - c["startS"].as_f64().unwrap()).sum();
    assert!((summary["underLoadS"].as_f64().unwrap() - under_load).abs() < 1e-6, "{summary:#}");
    assert!(under_load < cycled, "settling ({cycled} s of cycles) is not under load ({under_load} s)");
    let throughput = summary["throughput"].as_f64().unwrap();
    assert!((throughput - 40.0 / under_load).abs() < 1e-6, "{throughput} ok/s");
    for cycle in cycles {
        assert_eq!(cycle["ok"].as_u64(), Some(20), "{cycle}");
    }
    // Each cycle's time to the needed replicas agrees with the samples in the JSON document.
    let samples = summary["samples"].as_array().unwrap();
    for cycle in summary["cycleResults"].as_array().unwrap() {
        let needed = cycle["neededReplicas"].as_u64().unwrap();
        assert!(needed > 0, "{cycle}");
        let (start, end) = (cycle["startS"].as_f64().unwrap(), cycle["endS"].as_f64().unwrap());
        let reached = samples.iter().any(|s| {
            let t = s["t"].as_f64().unwrap();
            t >= start && t <= end && s["ready"].as_u64().unwrap() >= needed
        });
        assert_eq!(reached, cycle["timeToNeededS"].is_f64(), "{cycle}");
    }

    // The report opens in Chromium and shows its four charts.
    let browser = Browser::start("load-report").await;
    let page = format!("file://{}", report.display());
    browser
        .run(async |b| {
            b.client.set_window_size(1100, 1500).await.unwrap();
            b.open(&page, "report").await;
            let titles = b.eval("return [...document.querySelectorAll('svg > title')].map(t => t.textContent)").await;
            assert_eq!(titles, serde_json::json!(["Replicas", "In flight", "Latency", "Requests"]));
            let drawn = b
                .eval(
                    "return [...document.querySelectorAll('svg')].map(s => \
                     s.getBoundingClientRect().height > 100 && s.querySelectorAll('path, rect, circle').length > 0)",
                )
                .await;
            assert_eq!(drawn, serde_json::json!([true, true, true, true]), "every chart is drawn");
            let starts = b.eval("return document.querySelectorAll('#chart-replicas g.start').length").await;
            assert!(starts.as_u64() > Some(0), "the replica starts are marked");
            let text = b.text("pre.summary").await;
            assert!(text.contains("2 from zero") && text.contains("under load"), "{text}");
            // The waits between the bursts are compressed: the time under load fills most of the width.
            let compressed = b
                .eval(
                    "const rects = [...document.querySelectorAll('#chart-replicas g.compressed rect')]; \
                     return {count: rects.length, share: rects.reduce((w, r) => w + r.width.baseVal.value, 0) / 880, \
                             labels: [...document.querySelectorAll('#chart-replicas g.compressed text')].map(t => t.textContent)}",
                )
                .await;
            assert!(compressed["count"].as_u64() >= Some(2), "the wait before and between the cycles: {compressed}");
            assert!(compressed["share"].as_f64() < Some(0.5), "the compressed waits take under half: {compressed}");
            let labels = compressed["labels"].as_array().unwrap();
            assert!(labels.iter().all(|l| l.as_str().is_some_and(|l| l.ends_with("s⋯"))), "{compressed}");
            let shot = b.shot("report-full").await;
            eprintln!("report screenshot: {}", shot.display());
            b.doc_shot("load-report.png").await;
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_start_from_a_store_reports_its_fetch_as_its_own_phase() {
    let model = std::fs::read(common::repo().join("examples/models/iris/model.onnx")).unwrap();
    let minio = stores::minio(&["models"]);
    minio.s3_put("models", "iris/model.onnx", &model);
    let dir = folder(&["iris"]);
    let text = manifest("s3", "unused", "minReplicas: 0").replace("file://./models/unused", "s3://models/iris");
    std::fs::write(dir.path().join("s3.yaml"), text).unwrap();
    let env = minio.s3_env(stores::S3_KEY);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let cache = dir.path().join("cache");
    let up = Up::start_with(dir.path(), CONFIG, &env, &["--model-cache", cache.to_str().unwrap()]);
    up.wait_for("s3 listed at zero", Duration::from_secs(60), |s| {
        s["services"][0]["revisions"][0]["desired"] == 0 && s["services"][0]["ready"] == true
    })
    .await;

    // Two cycles from zero: the first downloads the model into the empty cache, the second reads it there.
    let report = dir.path().join("report.html");
    let url = format!("http://{}/v2/models/s3/infer", up.addr);
    let admin = up.admin.to_string();
    let mut args = vec![url.as_str(), "-b", IRIS_ROW, "--admin", &admin, "--json", "-o", report.to_str().unwrap()];
    args.extend(["--burst", "4", "--idle", "zero", "--cycles", "2", "--settle", "1s", "-d", "30s"]);
    let (code, stdout) = load(&args).await;
    assert_eq!(code, 0, "{stdout}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    let starts = summary["coldStarts"]["starts"].as_array().unwrap();
    assert_eq!(starts.len(), 2, "one start from zero per cycle: {starts:?}");
    let bytes = model.len() as u64;
    let (first, second) = (&starts[0], &starts[1]);
    assert_eq!(first["revision"], "s3-predictor-00001", "{first}");
    assert_eq!(first["fetch"]["uri"], "s3://models/iris", "{first}");
    assert_eq!((first["fetch"]["cached"].as_bool(), first["fetch"]["downloaded"].as_u64()), (Some(false), Some(bytes)));
    assert_eq!((second["fetch"]["cached"].as_bool(), second["fetch"]["downloaded"].as_u64()), (Some(true), Some(0)));
    for start in starts {
        assert_eq!(start["fetch"]["bytes"].as_u64(), Some(bytes), "{start}");
        assert!(start["fetch"]["ms"].is_u64() && start["spawnMs"].is_u64() && start["loadMs"].is_u64(), "{start}");
    }
    // The second start is the one skiff up's status shows last.
    let status = up.status().await;
    let fetched = &status["services"][0]["revisions"][0]["fetched"];
    assert_eq!(
        (fetched["millis"].clone(), fetched["cached"].clone()),
        (second["fetch"]["ms"].clone(), Value::Bool(true))
    );

    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<table class=\"cold\">"), "the report tables the cold starts");
    assert!(html.contains("<td>s3://models/iris (store)</td>") && html.contains("<td>s3://models/iris (cache)</td>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_rate_is_sent_within_two_percent_of_the_rate_asked() {
    let dir = folder(&["warm"]);
    std::fs::write(dir.path().join("warm.yaml"), manifest("warm", "warm", "minReplicas: 1")).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("warm ready with a replica", Duration::from_secs(60), |s| {
        s["services"][0]["revisions"][0]["ready"] == 1
    })
    .await;
    let base = format!("http://{}", up.addr);
    let admin = up.admin.to_string();
    let args = [&base, "--model", "warm", "--host", "warm.default.example.com", "--admin", &admin];
    let (code, stdout) = load(&[&args[..], &["--rate", "200", "-d", "5s", "--json"]].concat()).await;
    assert_eq!(code, 0, "{stdout}");
    let summary: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(summary["requests"].as_u64(), Some(1000), "200/s for 5 s is 1000 requests");
    assert_eq!(summary["errors"].as_u64(), Some(0), "{:#}", summary["errorsByKind"]);
    let sent = summary["rate"]["sent"].as_f64().unwrap();
    eprintln!("asked 200/s, sent at {sent:.2}/s");
    assert!((sent - 200.0).abs() <= 200.0 * 0.02, "sent at {sent}/s");
    assert!(summary["target"].as_str().unwrap().contains("Host warm.default.example.com"), "{summary:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossed_thresholds_exit_99_and_an_unreachable_target_exits_1() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/nothing-here", listener.local_addr().unwrap());
    let not_found = axum::Router::new().fallback(|| async { (http::StatusCode::NOT_FOUND, "no") });
    tokio::spawn(async move { axum::serve(listener, not_found).await });
    let quick = [url.as_str(), "-c", "2", "-d", "1s"];

    let (code, stdout) = load(&[&quick[..], &["--max-errors", "0"]].concat()).await;
    assert_eq!(code, 99, "{stdout}");
    assert!(stdout.contains("HTTP 404") && stdout.contains("errors ≤ 0: CROSSED"), "{stdout}");

    let (code, stdout) = load(&[&quick[..], &["--max-errors", "100%", "--max-p99", "1us"]].concat()).await;
    assert_eq!(code, 99, "{stdout}");
    assert!(stdout.contains("errors ≤ 100%: ok") && stdout.contains("p99 ≤ 1µs: CROSSED"), "{stdout}");

    let (code, stdout) = load(&[&quick[..], &["--max-errors", "100%"]].concat()).await;
    assert_eq!(code, 0, "{stdout}");

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (code, stdout) = load(&[&format!("http://{closed}/"), "-c", "1", "-d", "1s"]).await;
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("connect: connection refused"), "{stdout}");
}
