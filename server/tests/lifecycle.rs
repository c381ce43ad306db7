//! Behaviour under concurrency and across the process's life: dynamic batching, the
//! container-concurrency queue and its 503, draining on SIGTERM, and a model that cannot load.

mod common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::{Value, json};

fn iris_dir() -> String {
    repo().join("examples/models/iris").display().to_string()
}

fn one_row(values: &[Value]) -> Value {
    json!({ "inputs": [{ "name": "input", "shape": [1, 4], "datatype": "FP32", "data": values }] })
}

/// The value of an unlabelled or labelled sample in the metrics text.
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {series} in metrics:\n{text}"))
}

async fn metrics_text(server: &Server) -> String {
    String::from_utf8(send(http::Method::GET, &server.url("/metrics"), "").await.body.to_vec()).unwrap()
}

#[tokio::test]
async fn batched_answers_equal_the_unbatched_reference() {
    let server = Server::start_ready(&[
        "--model-dir",
        &iris_dir(),
        "--enable-batching",
        "--max-batch-size",
        "5",
        "--max-latency-ms",
        "2000",
        "--workers",
        "1",
    ])
    .await;
    let case = &expectations("iris")["cases"][1];
    let inputs = case["inputs"][0]["data"].as_array().unwrap();
    let requests = inputs.chunks(4).map(|row| {
        let url = server.url("/v2/models/iris/infer");
        let body = one_row(row);
        tokio::spawn(async move { post(&url, &body).await })
    });
    let replies: Vec<(StatusCode, Value)> = futures_join(requests.collect()).await;
    for (i, (status, body)) in replies.iter().enumerate() {
        assert_eq!(*status, StatusCode::OK, "{body}");
        let label = &case["outputs"][0]["data"][i];
        let probabilities = Value::from(case["outputs"][1]["data"].as_array().unwrap()[i * 3..i * 3 + 3].to_vec());
        let want = json!([
            { "name": "label", "datatype": "INT64", "shape": [1], "data": [label] },
            { "name": "probabilities", "datatype": "FP32", "shape": [1, 3], "data": probabilities },
        ]);
        assert_outputs_match(&body["outputs"], &want, &format!("row {i}"));
    }
    let text = metrics_text(&server).await;
    let runs = metric(&text, r#"skiff_batch_size_count{model="iris"}"#);
    let requests = metric(&text, r#"skiff_batch_size_sum{model="iris"}"#);
    assert_eq!(requests, 5.0);
    assert!(runs < 5.0, "5 concurrent requests ran in {runs} runs: nothing was batched");
}

async fn futures_join<T: Send + 'static>(handles: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

/// A batching window longer than the test's steps keeps a request in flight on purpose.
const HOLD: &[&str] = &["--enable-batching", "--max-batch-size", "1000", "--max-latency-ms", "1500", "--workers", "1"];

#[tokio::test]
async fn a_full_queue_answers_503_at_once_and_loses_nothing() {
    let dir = iris_dir();
    let mut args = vec!["--model-dir", dir.as_str(), "--container-concurrency", "1", "--max-queued", "1"];
    args.extend_from_slice(HOLD);
    let server = Server::start_ready(&args).await;
    let url = server.url("/v2/models/iris/infer");
    let row = one_row(&[json!(6.8), json!(2.8), json!(4.8), json!(1.4)]);

    let running = tokio::spawn({
        let (url, row) = (url.clone(), row.clone());
        async move { post(&url, &row).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued = tokio::spawn({
        let (url, row) = (url.clone(), row.clone());
        async move { post(&url, &row).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let text = metrics_text(&server).await;
    assert_eq!(metric(&text, "skiff_inflight_requests"), 2.0);
    assert_eq!(metric(&text, "skiff_queued_requests"), 1.0);

    let refused = send(http::Method::POST, &url, serde_json::to_vec(&row).unwrap()).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(
        refused.json()["error"],
        "server overloaded: all 1 concurrency slots are busy and 1 requests are already queued"
    );

    for handle in [running, queued] {
        let (status, body) = handle.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["outputs"][0]["data"], json!([1]));
    }
    let text = metrics_text(&server).await;
    assert_eq!(metric(&text, r#"skiff_requests_total{model="iris",protocol="v2",status="200"}"#), 2.0);
    assert_eq!(metric(&text, r#"skiff_requests_total{model="iris",protocol="v2",status="503"}"#), 1.0);
}

#[tokio::test]
async fn sigterm_drains_the_request_in_flight_then_exits_zero() {
    let dir = iris_dir();
    let mut args = vec!["--model-dir", dir.as_str()];
    args.extend_from_slice(HOLD);
    let mut server = Server::start_ready(&args).await;
    let url = server.url("/v2/models/iris/infer");
    let in_flight = tokio::spawn({
        let url = url.clone();
        async move { post(&url, &one_row(&[json!(6.8), json!(2.8), json!(4.8), json!(1.4)])).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.terminate();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = tokio::net::TcpStream::connect(server.addr).await;
    assert!(refused.is_err(), "a new connection was accepted while draining");

    let (status, body) = in_flight.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outputs"][0]["data"], json!([1]));
    let exit = server.wait_exit(Duration::from_secs(10));
    assert!(exit.success(), "exit status {exit}");
    assert!(server.drain_logs().iter().any(|l| l.contains("drained")));
}

#[tokio::test]
async fn with_a_shutdown_delay_it_serves_on_unready_before_it_closes() {
    let dir = iris_dir();
    let mut server = Server::start_ready(&["--model-dir", dir.as_str(), "--shutdown-delay-secs", "2"]).await;
    server.terminate();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (ready, _) = get(&server.url("/v2/health/ready")).await;
    assert_eq!(ready, StatusCode::SERVICE_UNAVAILABLE, "readiness is off at once");
    let (status, body) =
        post(&server.url("/v2/models/iris/infer"), &one_row(&[json!(6.8), json!(2.8), json!(4.8), json!(1.4)])).await;
    assert_eq!(status, StatusCode::OK, "a request sent during the delay is served: {body}");
    let exit = server.wait_exit(Duration::from_secs(10));
    assert!(exit.success(), "exit status {exit}");
}

#[tokio::test]
async fn a_model_that_cannot_load_ends_the_process_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("broken");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("model.onnx"), b"this is not an onnx graph").unwrap();
    let mut server = Server::start(&["--model-dir", dir.to_str().unwrap()]);
    let exit = server.wait_exit(Duration::from_secs(20));
    assert!(!exit.success());
    std::thread::sleep(Duration::from_millis(100));
    let logs = server.drain_logs().join("\n");
    assert!(logs.contains("cannot load model 'broken'"), "{logs}");
}

/// The first hour: a binary built in the checkout finds the library `scripts/setup.sh` installed,
/// with no `ORT_DYLIB_PATH` and no flag.
#[tokio::test]
async fn onnx_runtime_is_found_without_environment_variables() {
    let server = Server::start_with_ort(&["--model-dir", &iris_dir()], None);
    server.wait_ready().await;
    let row = one_row(&[json!(6.8), json!(2.8), json!(4.8), json!(1.4)]);
    let (status, body) = post(&server.url("/v2/models/iris/infer"), &row).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outputs"][0]["data"], json!([1]), "{body}");
}
