//! The model server as a hostile client finds it: overflowing shapes, values the types cannot
//! hold, NUL bytes, huge echoes, slow clients and many large bodies at once. Every one is a clear
//! 4xx (or a 503 that says when to retry), and the server stays up and bounded.

mod common;

use std::time::{Duration, Instant};

use common::*;
use http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn models() -> String {
    repo().join("examples/models").display().to_string()
}

fn dtypes() -> String {
    repo().join("tests/fixtures/models/dtypes").display().to_string()
}

/// The lookup model with batching on, one worker, and a batch window of `window_ms`.
async fn batching_lookup(window_ms: &str) -> Server {
    let lookup = repo().join("tests/fixtures/models/lookup").display().to_string();
    Server::start_ready(&["--model-dir", &lookup, "--enable-batching", "--max-latency-ms", window_ms, "--workers", "1"])
        .await
}

fn v2(name: &str, shape: &str, datatype: &str, data: &str) -> String {
    format!(r#"{{"inputs":[{{"name":"{name}","shape":{shape},"datatype":"{datatype}","data":{data}}}]}}"#)
}

async fn refused(url: &str, body: String) -> String {
    let reply = send(Method::POST, url, body.clone()).await;
    let shown = &body[..body.len().min(200)];
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{shown}: {}", String::from_utf8_lossy(&reply.body));
    reply.json()["error"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn shapes_that_overflow_or_outgrow_their_data_are_400_naming_the_input() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let iris = server.url("/v2/models/iris/infer");
    let message = refused(&iris, v2("input", "[4611686018427387904,4]", "FP32", "[1,2,3,4]")).await;
    assert_eq!(message, "input 'input' has shape [4611686018427387904, 4] whose element count overflows");
    let message = refused(&iris, v2("input", "[1000000000,4]", "FP32", "[1,2,3,4]")).await;
    assert_eq!(
        message,
        "input 'input' has shape [1000000000, 4] of 4000000000 elements, more than its 9 bytes of data can hold"
    );
    let rank_40 = format!("[{}]", ["1"; 40].join(","));
    let message = refused(&iris, v2("input", &rank_40, "FP32", "[1]")).await;
    assert!(message.starts_with("invalid infer request: shape has more than 32 dimensions"), "{message}");
    let message = refused(&iris, v2("input", "[1,4]", "FP32", "[1,2,3,4,5]")).await;
    assert_eq!(message, "input 'input': has more than 4 elements");
    assert_eq!(send(Method::GET, &server.url("/v2/health/ready"), "").await.status, StatusCode::OK);
}

#[tokio::test]
async fn values_a_type_cannot_hold_are_400() {
    let server = Server::start_ready(&["--model-dir", &dtypes()]).await;
    let url = server.url("/v2/models/dtypes/infer");
    let cases = [
        (
            v2("in_fp32", "[1,2]", "FP32", "[1e39,0]"),
            "input 'in_fp32': element 0 is 1e39, which is out of range for FP32",
        ),
        (
            v2("in_fp16", "[1,2]", "FP16", "[0,70000]"),
            "input 'in_fp16': element 1 is 70000, which is out of range for FP16",
        ),
        (
            v2("in_bf16", "[1,2]", "BF16", "[-1e39,0]"),
            "input 'in_bf16': element 0 is -1e39, which is out of range for BF16",
        ),
        (
            v2("in_bytes", "[1,2]", "BYTES", r#"["ok","nul\u0000inside"]"#),
            "input 'in_bytes': element 1 holds a NUL byte, which a BYTES element cannot (ONNX Runtime strings end at NUL)",
        ),
        (
            v2("in_uint8", "[1,2]", "UINT8", "[0,256]"),
            "input 'in_uint8': element 1 is 256, which is not a valid UINT8 value",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(refused(&url, body).await, want);
    }
}

#[tokio::test]
async fn errors_never_echo_unbounded_input() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let iris = server.url("/v2/models/iris/infer");
    let huge = "x".repeat(1 << 20);
    let message = refused(&iris, v2("input", "[1,4]", "FP32", &format!(r#"[1,2,"{huge}",4]"#))).await;
    assert!(message.len() < 400 && message.ends_with("…, which is not a valid FP32 value"), "{message}");
    let message = refused(&iris, v2("input", "[1,4]", &huge, "[1,2,3,4]")).await;
    assert!(message.len() < 600 && message.contains("xxx…"), "{}", &message[..message.len().min(600)]);
    let wide = format!("[{}]", vec!["-1"; 30].join(","));
    let message = refused(&iris, v2("input", &wide, "FP32", "[1]")).await;
    assert!(message.len() < 400, "{message}");
}

/// A client that sends its headers a byte at a time is cut at the header timeout; one that stops
/// sending its body gets 408 at the body timeout. The time to cut is printed.
#[tokio::test]
async fn slow_clients_are_cut_at_the_phase_timeouts() {
    let server =
        Server::start_ready(&["--model-dir", &models(), "--header-timeout-secs", "2", "--body-timeout-secs", "2"])
            .await;
    let mut slow = TcpStream::connect(server.addr).await.unwrap();
    let started = Instant::now();
    let dribble = async {
        for byte in b"POST /v2/models/iris/infer HTTP/1.1\r\nhost: x\r\nx-padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
            if slow.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("every header byte was taken over {:?}", started.elapsed());
    };
    dribble.await;
    let cut = started.elapsed();
    eprintln!("slow headers: cut after {cut:?} (header timeout 2 s)");
    assert!(cut >= Duration::from_secs(2), "cut before the timeout: {cut:?}");

    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    stalled
        .write_all(b"POST /v2/models/iris/infer HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"inputs\":")
        .await
        .unwrap();
    let started = Instant::now();
    let mut answer = String::new();
    stalled.read_to_string(&mut answer).await.unwrap();
    eprintln!("stalled body: answered after {:?} (body timeout 2 s)", started.elapsed());
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("the request body did not arrive within 2s"), "{answer}");
}

/// 64 clients each send a 32 MiB body at once. Bodies and their tensors are admitted against a
/// 256 MiB budget: each client gets 200 or 503 with Retry-After, none is dropped, and the server's
/// peak memory stays bounded (printed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_large_bodies_at_once_stay_within_the_memory_budget() {
    let server = Server::start_ready(&["--model-dir", &models(), "--max-buffered-bytes", "268435456"]).await;
    let rows = (32 << 20) / 20;
    let row = "[1.5,2.5,3.5,4.5],";
    let mut data = row.repeat(rows);
    data.pop();
    let body = bytes::Bytes::from(v2("input", &format!("[{rows},4]"), "FP32", &format!("[{data}]")));
    assert!(body.len() <= 32 << 20, "{} bytes", body.len());
    let url = server.url("/v2/models/iris/infer");
    let baseline = server.peak_rss();
    let clients: Vec<_> = (0..64)
        .map(|_| {
            let (url, body) = (url.clone(), body.clone());
            tokio::spawn(async move { send(Method::POST, &url, body).await })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for client in clients {
        let reply = client.await.unwrap();
        match reply.status {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(reply.headers["retry-after"], "1");
                assert!(reply.json()["error"].as_str().unwrap().contains("retry later"));
                busy += 1;
            }
            other => panic!("{other}: {}", String::from_utf8_lossy(&reply.body)),
        }
    }
    let peak = server.peak_rss();
    eprintln!(
        "64 × {} MiB bodies, budget 256 MiB: {ok} answered, {busy} refused with 503; peak RSS {} MiB (before: {} MiB)",
        body.len() >> 20,
        peak >> 20,
        baseline >> 20
    );
    assert!(ok >= 1, "at least one body fits the budget");
    assert!(peak < 1536 << 20, "peak RSS {} MiB", peak >> 20);
}

/// With batching on, four good lookups and one whose index is out of the table's range arrive
/// together and share a batch: ONNX Runtime refuses the batch, the server runs each request alone,
/// and only the bad one fails, with a 400 that says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_request_never_fails_the_rest_of_its_batch() {
    let server = batching_lookup("500").await;
    let url = server.url("/v2/models/lookup/infer");
    let clients: Vec<_> = [1, 3, 9, 0, 4]
        .into_iter()
        .map(|index| {
            let url = url.clone();
            tokio::spawn(async move {
                (index, send(Method::POST, &url, v2("index", "[1,1]", "INT64", &format!("[{index}]"))).await)
            })
        })
        .collect();
    for client in clients {
        let (index, reply) = client.await.unwrap();
        if index == 9 {
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", String::from_utf8_lossy(&reply.body));
            let message = reply.json()["error"].as_str().unwrap().to_owned();
            assert!(message.starts_with("the model refused the input:") && message.contains("idx=9"), "{message}");
        } else {
            assert_eq!(reply.status, StatusCode::OK, "index {index}: {}", String::from_utf8_lossy(&reply.body));
            let row = reply.json()["outputs"][0]["data"].clone();
            assert_eq!(row, serde_json::json!([f64::from(2 * index), f64::from(2 * index + 1)]), "index {index}");
        }
    }
    let metrics = send(Method::GET, &server.url("/metrics"), "").await;
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    let value = |name: &str| -> f64 {
        text.lines().find_map(|l| l.strip_prefix(name)?.split_whitespace().last()?.parse().ok()).unwrap_or(0.0)
    };
    let (sum, count) =
        (value("skiff_batch_size_sum{model=\"lookup\"}"), value("skiff_batch_size_count{model=\"lookup\"}"));
    assert!(sum > count, "no batch held more than one request (sum {sum}, count {count}): {text}");
}

/// A request whose client went away before it ran is not run: with batching on, a job waits in
/// the batch window, its client disconnects, and the batch runs without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_left_is_not_run() {
    let server = batching_lookup("1000").await;
    let url = server.url("/v2/models/lookup/infer");
    let stays = tokio::spawn(async move { send(Method::POST, &url, v2("index", "[1,1]", "INT64", "[2]")).await });
    let body = v2("index", "[1,1]", "INT64", "[3]");
    let mut leaves = TcpStream::connect(server.addr).await.unwrap();
    let head = format!("POST /v2/models/lookup/infer HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n", body.len());
    leaves.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(leaves);
    assert_eq!(stays.await.unwrap().status, StatusCode::OK);
    let metrics = send(Method::GET, &server.url("/metrics"), "").await;
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(text.contains("skiff_batch_size_sum{model=\"lookup\"} 1.0"), "the batch ran the request that left: {text}");
}
