//! Queue-proxy mode over real sockets: the concurrency limit, 503 when the queue is full, the
//! in-flight gauge, readiness from the container's, a SIGTERM drain of the real binary with a
//! request in flight, the request logger (a CloudEvents sink in the test; a streamed answer passes it
//! unheld) and the batcher (a model stand-in that counts the requests it gets).

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{StreamingUpstream, Upstream, dead_addr, get, next_data, open, wait_until};
use http::StatusCode;
use serde_json::Value;
use skiff_activator::{QueueProxy, QueueProxyConfig};
use skiff_http::args::{AdmissionArgs, BatchingArgs};
use tokio::net::TcpListener;

async fn start(config: QueueProxyConfig) -> (Arc<QueueProxy>, SocketAddr) {
    let proxy = QueueProxy::new(config).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(proxy.clone().serve(listener, std::future::pending()));
    (proxy, addr)
}

fn config(upstream: SocketAddr, container_concurrency: usize, max_queued: usize) -> QueueProxyConfig {
    let admission = AdmissionArgs { container_concurrency, max_queued: Some(max_queued) };
    QueueProxyConfig { upstream, admission, ..QueueProxyConfig::default() }
}

/// The value of an unlabelled sample in a metrics exposition.
fn sample(metrics: &str, name: &str) -> Option<i64> {
    metrics.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn concurrency_is_limited_and_a_full_queue_answers_503() {
    let upstream = Upstream::start("container").await;
    let (proxy, addr) = start(config(upstream.addr, 1, 1)).await;
    let url = format!("http://{addr}/hold");
    let held: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { get(&url, None).await })
        })
        .collect();
    wait_until("one at the container and one queued", || {
        let metrics = proxy.metrics_text();
        sample(&metrics, "skiff_inflight_requests") == Some(2) && sample(&metrics, "skiff_queued_requests") == Some(1)
    })
    .await;
    assert_eq!(upstream.in_flight(), 1);

    let refused = get(&format!("http://{addr}/"), None).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers["retry-after"], "1");
    let message = refused.json()["error"].as_str().unwrap().to_owned();
    assert!(message.contains("1 requests are already queued"), "{message}");

    let scraped = get(&format!("http://{addr}/metrics"), None).await;
    assert_eq!(scraped.status, StatusCode::OK);
    assert_eq!(sample(&scraped.text(), "skiff_inflight_requests"), Some(2), "{}", scraped.text());

    upstream.release(2);
    for request in held {
        let reply = request.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.json()["id"], "container");
    }
    assert_eq!(upstream.max_in_flight(), 1, "containerConcurrency 1 is honoured");
    let metrics = proxy.metrics_text();
    assert_eq!(sample(&metrics, "skiff_inflight_requests"), Some(0), "{metrics}");
    assert_eq!(sample(&metrics, "skiff_queued_requests"), Some(0), "{metrics}");
    assert!(metrics.contains(r#"skiff_queue_proxy_requests_total{status="503"} 1"#), "{metrics}");
}

#[tokio::test]
async fn readiness_follows_the_container() {
    let upstream = Upstream::start("container").await;
    let (_, addr) = start(config(upstream.addr, 0, 0)).await;
    let reply = get(&format!("http://{addr}/healthz"), None).await;
    assert_eq!((reply.status, reply.json()["ready"].clone()), (StatusCode::OK, Value::Bool(true)));
    assert_eq!(upstream.received(), 0, "without a readiness path, a connection is enough");

    let with_path = QueueProxyConfig { readiness_path: Some("/v2/health/ready".into()), ..config(upstream.addr, 0, 0) };
    let (_, addr) = start(with_path).await;
    assert_eq!(get(&format!("http://{addr}/healthz"), None).await.status, StatusCode::OK);
    assert_eq!(upstream.received(), 1, "the container's readiness path was asked");

    let (_, addr) = start(config(dead_addr().await, 0, 0)).await;
    let reply = get(&format!("http://{addr}/healthz"), None).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(reply.json()["error"].as_str().unwrap().contains("refuses connections"), "{}", reply.text());
}

#[tokio::test]
async fn unlimited_concurrency_sends_everything_through() {
    let upstream = Upstream::start("container").await;
    let (_, addr) = start(config(upstream.addr, 0, 0)).await;
    let held: Vec<_> = (0..5)
        .map(|_| {
            let url = format!("http://{addr}/hold");
            tokio::spawn(async move { get(&url, None).await })
        })
        .collect();
    wait_until("all five at the container", || upstream.in_flight() == 5).await;
    upstream.release(5);
    for request in held {
        assert_eq!(request.await.unwrap().status, StatusCode::OK);
    }
}

/// The real binary, its stderr forwarded to the test's output.
struct Binary {
    child: Child,
    addr: SocketAddr,
}

impl Binary {
    fn start(upstream: SocketAddr) -> Binary {
        let child = Command::new(env!("CARGO_BIN_EXE_skiff-activator"))
            .args(["--log-format", "json", "queue-proxy", "--bind", "127.0.0.1", "--port", "0"])
            .args(["--upstream", &upstream.to_string(), "--container-concurrency", "2", "--drain-timeout-secs", "30"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start skiff-activator");
        // Owned by `Binary` at once, so that its drop kills and reaps the process on every path.
        let mut binary = Binary { child, addr: SocketAddr::from(([0, 0, 0, 0], 0)) };
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = binary.child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[skiff-activator] {line}");
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("skiff-activator exited or did not log 'listening' within 20 s");
            let Ok(log) = serde_json::from_str::<Value>(&line) else { continue };
            if log["fields"]["message"] == "listening" {
                binary.addr = log["fields"]["address"].as_str().unwrap().parse().unwrap();
                return binary;
            }
        }
    }

    fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn sigterm_stops_accepting_and_drains_the_request_in_flight() {
    let upstream = Upstream::start("container").await;
    let mut binary = Binary::start(upstream.addr);
    let url = format!("http://{}/hold", binary.addr);
    let in_flight = tokio::spawn(async move { get(&url, None).await });
    wait_until("the request at the container", || upstream.in_flight() == 1).await;

    binary.terminate();
    let addr = binary.addr;
    let mut refused = false;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !refused {
        assert!(Instant::now() < deadline, "still accepting 20 s after SIGTERM");
        refused = tokio::net::TcpStream::connect(addr).await.is_err();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(binary.child.try_wait().unwrap().is_none(), "still draining while a request is in flight");

    upstream.release(1);
    let reply = in_flight.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = binary.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "skiff-activator still running 20 s after draining");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(status.success(), "exit status {status}");
}

/// Queue-proxy mode budgets held body bytes too: with a 32 MiB budget, a second 20 MiB body while
/// the first is held at the container is refused with 503 and Retry-After, and goes through later.
#[tokio::test]
async fn held_bodies_past_the_byte_budget_are_refused() {
    let upstream = Upstream::start("container").await;
    let budget = 32 * 1024 * 1024;
    let (_proxy, addr) = start(QueueProxyConfig { max_held_bytes: budget, ..config(upstream.addr, 1, 10) }).await;
    let body = "x".repeat(20 * 1024 * 1024);
    let url = format!("http://{addr}/hold");
    let held = {
        let (url, body) = (url.clone(), body.clone());
        tokio::spawn(async move { common::post(&url, None, &body).await })
    };
    wait_until("the first body at the container", || upstream.in_flight() == 1).await;
    let refused = common::post(&format!("http://{addr}/"), None, &body).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.text());
    assert_eq!(refused.headers["retry-after"], "1");
    assert!(refused.json()["error"].as_str().unwrap().starts_with("the queue-proxy already holds 20971520 bytes"));
    upstream.release(1);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
    assert_eq!(common::post(&format!("http://{addr}/"), None, &body).await.status, StatusCode::OK);
}

/// A CloudEvents sink: records each event's headers and body.
struct Sink {
    addr: SocketAddr,
    events: std::sync::Mutex<Vec<(http::HeaderMap, bytes::Bytes)>>,
}

impl Sink {
    async fn start() -> Arc<Sink> {
        use http_body_util::BodyExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sink = Arc::new(Sink { addr: listener.local_addr().unwrap(), events: Default::default() });
        let server = sink.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let server = server.clone();
                        async move {
                            let (parts, body) = request.into_parts();
                            let body = body.collect().await.unwrap().to_bytes();
                            server.events.lock().unwrap().push((parts.headers, body));
                            Ok::<_, std::convert::Infallible>(http::Response::new(
                                http_body_util::Empty::<bytes::Bytes>::new(),
                            ))
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        sink
    }

    fn events(&self) -> Vec<(http::HeaderMap, bytes::Bytes)> {
        self.events.lock().unwrap().clone()
    }
}

fn logged(upstream: SocketAddr, sink: SocketAddr) -> QueueProxyConfig {
    let mut config = config(upstream, 0, 0);
    config.logger.logger_url = Some(format!("http://{sink}/events"));
    // The sink listens on loopback: allowed in skiff up's rule, as skiff up passes it.
    config.logger.logger_allow_loopback = true;
    config.logger.logger_source = "http://iris-predictor.models".into();
    config.logger.inference_service = "iris".into();
    config.logger.namespace = "models".into();
    config.logger.revision = "iris-predictor-00001".into();
    config
}

/// A request through the real queue-proxy to a real upstream arrives at the sink as two binary-mode
/// CloudEvents with one id: the request as sent, and the container's answer as received. The
/// container saw the id the queue-proxy made, and reads (GET) are not logged.
#[tokio::test]
async fn the_logger_sends_the_request_and_its_response_as_cloud_events() {
    let upstream = Upstream::start("container").await;
    let sink = Sink::start().await;
    let (proxy, addr) = start(logged(upstream.addr, sink.addr)).await;
    let body = r#"{"instances": [[1.0, 2.0]]}"#;
    let reply = common::post(&format!("http://{addr}/v1/models/iris:predict"), None, body).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(get(&format!("http://{addr}/v1/models/iris"), None).await.status, StatusCode::OK);
    wait_until("two events at the sink", || sink.events().len() == 2).await;

    let mut events = sink.events();
    events.sort_by_key(|(headers, _)| headers["ce-type"].to_str().unwrap().to_owned());
    let [(request, request_body), (response, response_body)] = <[_; 2]>::try_from(events).unwrap();
    assert_eq!(request["ce-type"], "org.kubeflow.serving.inference.request");
    assert_eq!(response["ce-type"], "org.kubeflow.serving.inference.response");
    for headers in [&request, &response] {
        assert_eq!(headers["ce-specversion"], "1.0");
        assert_eq!(headers["ce-source"], "http://iris-predictor.models");
        assert_eq!(headers["ce-inferenceservicename"], "iris");
        assert_eq!(headers["ce-namespace"], "models");
        assert_eq!(headers["ce-component"], "predictor");
        assert_eq!(headers["ce-revision"], "iris-predictor-00001");
        assert_eq!(headers["content-type"], "application/json");
    }
    assert_eq!(request["ce-id"], response["ce-id"], "one id for the pair");
    assert_eq!(request["ce-id"].len(), 36, "a new UUID when the client sent no X-Request-Id");
    assert_eq!(request_body, body);
    assert_eq!(response_body, reply.body, "the response as the client got it");
    assert_eq!(sink.events().len(), 2, "the GET was not logged");
    wait_until("both counted as sent", || {
        proxy.metrics_text().contains(r#"skiff_logger_events_total{outcome="sent"} 2"#)
    })
    .await;
    assert!(!proxy.metrics_text().contains(r#"outcome="dropped""#), "{}", proxy.metrics_text());
}

/// A streamed answer passes the request logger as the container writes it: its first event reaches
/// the client while the container holds back the rest, and only the request is logged by then. The
/// answer is logged whole once its last byte has passed.
#[tokio::test]
async fn the_logger_passes_a_streamed_answer_as_it_comes_and_logs_it_whole_at_its_end() {
    let upstream = StreamingUpstream::start().await;
    let sink = Sink::start().await;
    let (_proxy, addr) = start(logged(upstream.addr, sink.addr)).await;
    let url = format!("http://{addr}/openai/v1/chat/completions");
    let response = common::open_post(&url, r#"{"model": "llama", "stream": true}"#).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut answer = response.into_body();
    // A liveness bound, not a timing check: a logger holding the stream back would wait forever.
    let first = tokio::time::timeout(Duration::from_secs(30), next_data(&mut answer)).await;
    assert_eq!(first.expect("the first event was held back").as_deref(), Some("data: first\n\n"));
    wait_until("the request's event", || !sink.events().is_empty()).await;
    let events = sink.events();
    assert_eq!(events.len(), 1, "the answer is not logged before its end");
    assert_eq!(events[0].0["ce-type"], "org.kubeflow.serving.inference.request");
    upstream.finish();
    assert_eq!(next_data(&mut answer).await.as_deref(), Some("data: [DONE]\n\n"));
    assert_eq!(next_data(&mut answer).await, None);
    wait_until("the answer's event", || sink.events().len() == 2).await;
    let (headers, logged) = sink.events().pop().unwrap();
    assert_eq!(headers["ce-type"], "org.kubeflow.serving.inference.response");
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(logged, "data: first\n\ndata: [DONE]\n\n", "the whole stream, as the client got it");
}

/// The client's X-Request-Id is the events' id.
#[tokio::test]
async fn the_clients_request_id_names_the_events() {
    let upstream = Upstream::start("container").await;
    let sink = Sink::start().await;
    let (_proxy, addr) = start(logged(upstream.addr, sink.addr)).await;
    let client: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let request = http::Request::post(format!("http://{addr}/v2/models/iris/infer"))
        .header("x-request-id", "client-id-7")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
        .unwrap();
    assert_eq!(client.request(request).await.unwrap().status(), StatusCode::OK);
    wait_until("two events at the sink", || sink.events().len() == 2).await;
    assert!(sink.events().iter().all(|(headers, _)| headers["ce-id"] == "client-id-7"));
}

/// A sink that is down fails no inference: the events count as failed.
#[tokio::test]
async fn a_sink_that_is_down_does_not_fail_the_inference() {
    let upstream = Upstream::start("container").await;
    let (proxy, addr) = start(logged(upstream.addr, dead_addr().await)).await;
    let reply = common::post(&format!("http://{addr}/v1/models/iris:predict"), None, r#"{"instances": [1]}"#).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["id"], "container");
    wait_until("both events counted as failed", || {
        proxy.metrics_text().contains(r#"skiff_logger_events_total{outcome="failed"} 2"#)
    })
    .await;
}

/// A model container stand-in for the batcher: counts requests and answers
/// `{"predictions": [10 * x for each instance [x]], "model_name": "m"}` (one prediction short
/// when `wrong`).
struct Model {
    addr: SocketAddr,
    requests: std::sync::atomic::AtomicUsize,
    instances: std::sync::Mutex<Vec<usize>>,
    wrong: bool,
}

impl Model {
    async fn start(wrong: bool) -> Arc<Model> {
        use http_body_util::BodyExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let model = Arc::new(Model {
            addr: listener.local_addr().unwrap(),
            requests: Default::default(),
            instances: Default::default(),
            wrong,
        });
        let server = model.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let server = server.clone();
                        async move {
                            server.requests.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let body: Value = serde_json::from_slice(&body).unwrap();
                            let instances = body["instances"].as_array().unwrap();
                            server.instances.lock().unwrap().push(instances.len());
                            let mut predictions: Vec<Value> =
                                instances.iter().map(|i| Value::from(i[0].as_i64().unwrap() * 10)).collect();
                            if server.wrong {
                                predictions.pop();
                            }
                            let answer = serde_json::json!({ "predictions": predictions, "model_name": "m" });
                            let mut response =
                                http::Response::new(http_body_util::Full::new(bytes::Bytes::from(answer.to_string())));
                            response.headers_mut().insert("content-type", "application/json".parse().unwrap());
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        model
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::Acquire)
    }
}

fn batching(upstream: SocketAddr, max_batch_size: usize) -> QueueProxyConfig {
    QueueProxyConfig {
        // Long enough that the batches here fill up rather than fall due; never waited out.
        batching: BatchingArgs { enable_batching: true, max_batch_size, max_latency_ms: 60_000 },
        ..config(upstream, 0, 0)
    }
}

/// Concurrent V1 callers through the queue-proxy: each gets the predictions of its own instances,
/// in order, and the container saw fewer requests than there were callers.
#[tokio::test]
async fn the_batcher_combines_callers_and_gives_each_its_own_predictions() {
    let model = Model::start(false).await;
    let (_proxy, addr) = start(batching(model.addr, 4)).await;
    let url = format!("http://{addr}/v1/models/m:predict");
    // Two instances each: in any arrival order, six callers make three full batches of four.
    let callers: Vec<_> = (0..6_i64)
        .map(|caller| {
            let url = url.clone();
            let instances: Vec<Value> = (0..2).map(|i| serde_json::json!([caller * 100 + i])).collect();
            tokio::spawn(async move {
                let body = serde_json::json!({ "instances": instances }).to_string();
                (caller, common::post(&url, None, &body).await)
            })
        })
        .collect();
    for caller in callers {
        let (caller, reply) = caller.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        let expected: Vec<i64> = (0..2).map(|i| (caller * 100 + i) * 10).collect();
        assert_eq!(reply.json()["predictions"], serde_json::json!(expected), "caller {caller}");
        assert_eq!(reply.json()["model_name"], "m");
    }
    assert_eq!(model.requests(), 3, "three full batches for six callers");
    assert_eq!(model.instances.lock().unwrap().iter().sum::<usize>(), 12);

    // Not an instances list, or not V1 predict: straight through.
    let reply = common::post(&url, None, r#"{"instances": [[7]], "parameters": {}}"#).await;
    assert_eq!(reply.json()["predictions"], serde_json::json!([70]));
    assert_eq!(model.instances.lock().unwrap().last(), Some(&1), "sent on its own");
}

/// A container that answers the wrong number of predictions: every caller hears a 500 saying so.
#[tokio::test]
async fn a_prediction_count_mismatch_is_a_500_for_every_caller() {
    let model = Model::start(true).await;
    let (_proxy, addr) = start(batching(model.addr, 2)).await;
    let url = format!("http://{addr}/v1/models/m:predict");
    let callers: Vec<_> = (0..2)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move { common::post(&url, None, &format!(r#"{{"instances": [[{i}]]}}"#)).await })
        })
        .collect();
    for caller in callers {
        let reply = caller.await.unwrap();
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR, "{}", reply.text());
        assert_eq!(reply.json()["error"], "the container answered 1 predictions for a batch of 2 instances");
    }
    assert_eq!(model.requests(), 1);
}

/// A container that fails the combined request: every caller gets its error.
#[tokio::test]
async fn a_failed_batch_is_every_callers_error() {
    let upstream = dead_addr().await;
    let (_proxy, addr) = start(batching(upstream, 2)).await;
    let url = format!("http://{addr}/v1/models/m:predict");
    let callers: Vec<_> = (0..2)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move { common::post(&url, None, &format!(r#"{{"instances": [[{i}]]}}"#)).await })
        })
        .collect();
    for caller in callers {
        let reply = caller.await.unwrap();
        assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{}", reply.text());
        assert!(reply.json()["error"].as_str().unwrap().contains("cannot connect"), "{}", reply.text());
    }
}

#[tokio::test]
async fn a_streamed_answer_counts_as_in_flight_until_its_last_byte() {
    let upstream = StreamingUpstream::start().await;
    let (proxy, addr) = start(config(upstream.addr, 1, 10)).await;
    let response = open(&format!("http://{addr}/v1/chat/completions"), None).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    assert_eq!(next_data(&mut body).await.as_deref(), Some("data: first\n\n"));
    let metrics = proxy.metrics_text();
    assert_eq!(sample(&metrics, "skiff_inflight_requests"), Some(1), "headers and an event sent: {metrics}");
    upstream.finish();
    assert_eq!(next_data(&mut body).await.as_deref(), Some("data: [DONE]\n\n"));
    assert_eq!(next_data(&mut body).await, None);
    wait_until("the count to drop at the last byte", || {
        sample(&proxy.metrics_text(), "skiff_inflight_requests") == Some(0)
    })
    .await;
}
