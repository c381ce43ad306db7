//! The request logger against a real HTTP sink on 127.0.0.1: binary-mode CloudEvents with their
//! attributes and bodies, the mode's filter, and a full queue or a dead sink counted, never
//! waited for.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use skiff_http::logger::sink::SinkPolicy;
use skiff_http::logger::{Half, LogMode, Logger, LoggerConfig, LoggerMetrics};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// A sink that forwards every event it gets, after `delay`, and answers `status`.
async fn sink(delay: Duration, status: u16) -> (String, mpsc::UnboundedReceiver<(HeaderMap, Bytes)>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/events", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let tx = tx.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let tx = tx.clone();
                async move {
                    let (parts, body) = request.into_parts();
                    let body = body.collect().await.unwrap().to_bytes();
                    tokio::time::sleep(delay).await;
                    let _ = tx.send((parts.headers, body));
                    let mut answer = Response::new(Full::new(Bytes::new()));
                    *answer.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    Ok::<_, Infallible>(answer)
                }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    (url, rx)
}

fn config(url: &str, mode: LogMode) -> LoggerConfig {
    LoggerConfig {
        source: "http://iris-predictor.models".into(),
        inference_service: "iris".into(),
        namespace: "models".into(),
        revision: "iris-predictor-00001".into(),
        // These sinks listen on 127.0.0.1, as in `skiff up`.
        sinks: SinkPolicy::standalone(),
        ..LoggerConfig::new(url.parse().unwrap(), mode)
    }
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..500 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what} did not happen within 5 s");
}

#[tokio::test]
async fn requests_and_responses_arrive_as_binary_mode_cloud_events() {
    let (url, mut events) = sink(Duration::ZERO, 200).await;
    let metrics = LoggerMetrics::default();
    let logger = Logger::start(config(&url, LogMode::All), metrics.clone());
    let json = HeaderValue::from_static("application/json");
    logger.log(Half::Request, "req-1", json.clone(), Bytes::from_static(br#"{"inputs":[]}"#));
    logger.log(Half::Response, "req-1", json, Bytes::from_static(br#"{"outputs":[]}"#));
    let mut got = [events.recv().await.unwrap(), events.recv().await.unwrap()];
    got.sort_by_key(|(headers, _)| headers["ce-type"].to_str().unwrap().to_owned());
    for ((headers, body), (kind, want)) in got.iter().zip([
        ("org.kubeflow.serving.inference.request", r#"{"inputs":[]}"#),
        ("org.kubeflow.serving.inference.response", r#"{"outputs":[]}"#),
    ]) {
        assert_eq!(headers["ce-type"], kind);
        assert_eq!(headers["ce-id"], "req-1");
        assert_eq!(headers["ce-specversion"], "1.0");
        assert_eq!(headers["ce-source"], "http://iris-predictor.models");
        assert_eq!(headers["ce-inferenceservicename"], "iris");
        assert_eq!(headers["ce-namespace"], "models");
        assert_eq!(headers["ce-component"], "predictor");
        assert_eq!(headers["ce-revision"], "iris-predictor-00001");
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(body, want.as_bytes());
    }
    eventually("two sends counted", || metrics.count("sent") == 2).await;
}

#[tokio::test]
async fn the_mode_picks_the_half_that_is_logged() {
    let (url, mut events) = sink(Duration::ZERO, 200).await;
    let logger = Logger::start(config(&url, LogMode::Response), LoggerMetrics::default());
    let json = HeaderValue::from_static("application/json");
    logger.log(Half::Request, "a", json.clone(), Bytes::from_static(b"request"));
    logger.log(Half::Response, "a", json, Bytes::from_static(b"response"));
    let (headers, body) = events.recv().await.unwrap();
    assert_eq!(headers["ce-type"], "org.kubeflow.serving.inference.response");
    assert_eq!(body, "response");
    assert!(tokio::time::timeout(Duration::from_millis(200), events.recv()).await.is_err(), "the request was sent");
}

#[tokio::test]
async fn a_full_queue_drops_and_a_failing_sink_is_counted_without_waiting() {
    let (slow, _events) = sink(Duration::from_secs(30), 200).await;
    let metrics = LoggerMetrics::default();
    let logger = Logger::start(
        LoggerConfig { max_queued_events: 2, concurrency: 1, ..config(&slow, LogMode::Request) },
        metrics.clone(),
    );
    for i in 0..50 {
        logger.log(Half::Request, &i.to_string(), HeaderValue::from_static("text/plain"), Bytes::from_static(b"x"));
    }
    assert!(metrics.count("dropped") >= 46, "dropped {}", metrics.count("dropped"));

    let bytes = Logger::start(
        LoggerConfig { max_queued_bytes: 10, concurrency: 1, ..config(&slow, LogMode::Request) },
        metrics.clone(),
    );
    let dropped = metrics.count("dropped");
    bytes.log(Half::Request, "big", HeaderValue::from_static("text/plain"), Bytes::from(vec![0; 11]));
    assert_eq!(metrics.count("dropped"), dropped + 1);

    let (refusing, _refused) = sink(Duration::ZERO, 500).await;
    let failing = Logger::start(config(&refusing, LogMode::All), metrics.clone());
    failing.log(Half::Request, "f", HeaderValue::from_static("text/plain"), Bytes::from_static(b"x"));
    let dead = Logger::start(config("http://127.0.0.1:9/events", LogMode::All), metrics.clone());
    dead.log(Half::Request, "d", HeaderValue::from_static("text/plain"), Bytes::from_static(b"x"));
    eventually("a refused and an unreachable send counted as failed", || metrics.count("failed") == 2).await;
}
