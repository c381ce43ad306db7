//! OpenAI requests to the router itself (a Host that names no service), as KServe's Hugging Face
//! runtime serves them under `/openai/v1/...` and vLLM under `/v1/...`: each reaches the
//! InferenceService its JSON body's `"model"` names with every byte it sent (the bytes read to
//! route it first, the rest streaming: the replica sees the request before the client has sent
//! it all); a body the router cannot read is 400 naming `model`, an unknown model 404 naming it;
//! `GET .../v1/models` lists the services; server-sent events reach the client one by one, each
//! before the replica writes the next.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::channel::Channel;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use skiff_dataplane::endpoints::Endpoints;
use skiff_router::{Router, RouterHandle};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, mpsc};

/// A liveness bound, not a timing check: how long a step may take before the test gives up.
const BOUND: Duration = Duration::from_secs(30);

/// A replica that tells `arrived` the path of each request as soon as its head arrives, then
/// answers with the whole body it got, its id in `x-replica` and the path in `x-seen-path`.
async fn echo_replica(id: &'static str, arrived: Option<mpsc::UnboundedSender<String>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let arrived = arrived.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let arrived = arrived.clone();
                async move {
                    let path = request.uri().path_and_query().unwrap().to_string();
                    if let Some(arrived) = arrived {
                        let _ = arrived.send(path.clone());
                    }
                    let body = request.into_body().collect().await.unwrap().to_bytes();
                    let mut response = Response::new(Full::new(body));
                    response.headers_mut().insert("x-replica", id.parse().unwrap());
                    response.headers_mut().insert("x-seen-path", path.parse().unwrap());
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

/// `llama` in namespace default and `qwen` in namespace team-a, each with its replica.
async fn two_models(arrived: Option<mpsc::UnboundedSender<String>>) -> (Router, RouterHandle) {
    let llama = echo_replica("llama-replica", arrived.clone()).await;
    let qwen = echo_replica("qwen-replica", arrived).await;
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/llama-predictor-00001", 0, &[llama]);
    revision(&endpoints, "team-a/qwen-predictor-00001", 0, &[qwen]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![
        service("default", "llama", vec![target("llama-predictor-00001", 100, None)]),
        service("team-a", "qwen", vec![target("qwen-predictor-00001", 100, None)]),
    ]);
    (router, handle)
}

/// What the router answered: status, headers and body.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Bytes,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("-", |v| v.to_str().unwrap())
    }

    fn error(&self) -> String {
        let body: Value = serde_json::from_slice(&self.body).unwrap();
        body["error"].as_str().unwrap().to_owned()
    }
}

/// Sends `method path` with `Host: host` and `body` (whole, with its Content-Length) to `router`.
async fn call(router: SocketAddr, method: &str, host: &str, path: &str, body: impl Into<Bytes>) -> Answer {
    let request =
        Request::builder().method(method).uri(path).header("host", host).body(Full::new(body.into())).unwrap();
    send(router, request).await
}

async fn send<B>(router: SocketAddr, request: Request<B>) -> Answer
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    Answer { status: parts.status.as_u16(), headers: parts.headers, body: body.collect().await.unwrap().to_bytes() }
}

/// A chat completion as OpenAI's Python client writes it: `messages` first, then `model`.
fn chat(model: &str, prompt: &str) -> String {
    let messages = json!({"messages": [{"role": "user", "content": prompt}]}).to_string();
    format!(r#"{},"model":{},"max_tokens":8,"stream":true}}"#, messages.strip_suffix('}').unwrap(), Value::from(model))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_reaches_the_service_its_body_names_with_every_byte() {
    let (_router, handle) = two_models(None).await;
    let addr = handle.listen_addr();
    let cases = [
        ("/openai/v1/chat/completions", chat("llama", "Hello"), "llama-replica"),
        ("/v1/chat/completions", chat("qwen", "Hello"), "qwen-replica"),
        ("/openai/v1/completions", json!({"model": "qwen", "prompt": "Once"}).to_string(), "qwen-replica"),
        ("/v1/completions?trace=1", json!({"model": "llama", "prompt": "Once"}).to_string(), "llama-replica"),
        ("/openai/v1/embeddings", json!({"input": ["a", "b"], "model": "llama"}).to_string(), "llama-replica"),
        ("/v1/embeddings", json!({"input": "a", "model": "qwen"}).to_string(), "qwen-replica"),
        // Past the 64 KiB read whole: the rest streams after the bytes read to route it.
        ("/openai/v1/chat/completions", chat("qwen", &"many words ".repeat(30_000)), "qwen-replica"),
    ];
    for host in ["localhost", "127.0.0.1:8080", "10.0.0.7"] {
        for (path, body, replica) in &cases {
            let answer = call(addr, "POST", host, path, body.clone()).await;
            assert_eq!(answer.status, 200, "{host} {path}: {:?}", answer.body);
            assert_eq!(answer.header("x-replica"), *replica, "{host} {path}");
            assert_eq!(answer.header("x-seen-path"), *path, "the path goes upstream unchanged");
            assert!(answer.body == body.as_bytes(), "{host} {path}: the replica got the body byte for byte");
        }
    }
    let answer = call(addr, "POST", "llama.default.example.com", "/v1/chat/completions", chat("qwen", "Hi")).await;
    assert_eq!(answer.header("x-replica"), "llama-replica", "a service's Host decides, not the body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_body_reaches_the_replica_before_the_client_has_sent_it_all() {
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel();
    let (_router, handle) = two_models(Some(arrived_tx)).await;
    let body = chat("llama", &"a long conversation ".repeat(20_000));
    let model_end = body.find(r#""llama""#).unwrap() + 7;
    // The model and a little more, then the rest only once the replica has the request.
    let (first, rest) = body.as_bytes().split_at(model_end + 5);
    let (mut sender, stream) = Channel::<Bytes, Infallible>::new(1);
    let request = Request::post("/openai/v1/chat/completions").header("host", "localhost").body(stream).unwrap();
    let answer = tokio::spawn(send(handle.listen_addr(), request));
    for piece in first.chunks(16 * 1024) {
        sender.send_data(Bytes::copy_from_slice(piece)).await.unwrap();
    }
    let path = tokio::time::timeout(BOUND, arrived.recv()).await.expect("the router held the request back");
    assert_eq!(path.as_deref(), Some("/openai/v1/chat/completions"));
    for piece in rest.chunks(16 * 1024) {
        sender.send_data(Bytes::copy_from_slice(piece)).await.unwrap();
    }
    drop(sender);
    let answer = answer.await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("x-replica"), "llama-replica");
    assert!(answer.body == body.as_bytes(), "the replica got every byte, in order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_waiting_for_100_continue_is_asked_for_its_body_before_it_is_read() {
    let (_router, handle) = two_models(None).await;
    let body = chat("qwen", "Hi");
    let mut stream = TcpStream::connect(handle.listen_addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut read = vec![0; 1024];
    let n = tokio::time::timeout(BOUND, stream.read(&mut read)).await.expect("no 100 Continue").unwrap();
    let interim = String::from_utf8_lossy(&read[..n]).into_owned();
    assert!(interim.starts_with("HTTP/1.1 100"), "{interim}");
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    while !String::from_utf8_lossy(&answer).contains(&body) {
        let n = tokio::time::timeout(BOUND, stream.read(&mut read)).await.expect("no answer").unwrap();
        assert!(n > 0, "closed before the answer: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&read[..n]);
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.contains("HTTP/1.1 200") && answer.contains("x-replica: qwen-replica"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_the_router_cannot_route_are_refused_naming_model_and_unknown_models_are_404() {
    let (_router, handle) = two_models(None).await;
    let addr = handle.listen_addr();
    let refused = [
        ("not json", "the body is not a JSON object"),
        ("", "the body is empty"),
        (r#"{"messages": [], "stream": true}"#, "its JSON object names no model"),
        (r#"{"model": 42}"#, "\"model\" is not a string"),
        (r#"{"model": ""}"#, "model name is empty"),
        (r#"{"messages": [{"role": "user""#, "ends before its JSON object does"),
    ];
    for (body, why) in refused {
        let answer = call(addr, "POST", "localhost", "/openai/v1/chat/completions", body).await;
        assert_eq!(answer.status, 400, "{body}");
        let error = answer.error();
        assert!(error.contains("\"model\" its JSON body names") && error.contains(why), "{body}: {error}");
    }
    let far = chat("llama", &"x".repeat(1024 * 1024));
    let answer = call(addr, "POST", "localhost", "/v1/chat/completions", far).await;
    assert_eq!(answer.status, 400);
    assert!(answer.error().contains("\"model\" is not within the first 1024 KiB"), "{}", answer.error());

    let answer = call(addr, "POST", "localhost", "/v1/completions", r#"{"model": "gpt-4", "prompt": "x"}"#).await;
    assert_eq!(answer.status, 404);
    assert!(answer.error().contains("no InferenceService serves model gpt-4"), "{}", answer.error());
    assert_eq!(call(addr, "GET", "localhost", "/v1/chat/completions", "").await.status, 404, "only POST");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_list_names_every_service_the_router_reaches() {
    let (router, handle) = two_models(None).await;
    let addr = handle.listen_addr();
    for path in ["/openai/v1/models", "/v1/models"] {
        let answer = call(addr, "GET", "localhost", path, "").await;
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.header("content-type"), "application/json");
        let list: Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(list["object"], "list");
        let models = list["data"].as_array().unwrap();
        let ids: Vec<&str> = models.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["llama", "qwen"], "{path}");
        for model in models {
            assert_eq!(model["object"], "model");
            assert!(model["created"].as_u64().unwrap() > 1_600_000_000, "{model}");
        }
        assert_eq!(models[1]["owned_by"], "team-a");
    }
    let answer = call(addr, "GET", "qwen.team-a.example.com", "/openai/v1/models", "").await;
    assert_eq!(answer.header("x-replica"), "qwen-replica", "a service's Host gets the service's own list");
    router.publish(vec![]);
    let answer = call(addr, "GET", "localhost", "/v1/models", "").await;
    assert_eq!(serde_json::from_slice::<Value>(&answer.body).unwrap(), json!({"object": "list", "data": []}));
}

/// A replica that streams `EVENTS` server-sent events, the last `[DONE]`: it counts each in
/// `written`, writes it, and goes on to the next only once `read` says the client has it (or after
/// the bound).
async fn sse_replica(written: Arc<AtomicUsize>, read: mpsc::Receiver<usize>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let read = Arc::new(Mutex::new(read));
    tokio::spawn(async move {
        let Ok((stream, _)) = listener.accept().await else { return };
        let service = service_fn(move |request: Request<Incoming>| {
            let (written, read) = (written.clone(), read.clone());
            async move {
                let _ = request.into_body().collect().await;
                let (mut sender, body) = Channel::<Bytes, Infallible>::new(1);
                tokio::spawn(async move {
                    let mut read = read.lock().await;
                    for i in 0..EVENTS {
                        let data = if i + 1 == EVENTS { "[DONE]".to_owned() } else { json!({"token": i}).to_string() };
                        written.store(i + 1, Ordering::SeqCst);
                        if sender.send_data(Bytes::from(format!("data: {data}\n\n"))).await.is_err() {
                            return;
                        }
                        let _ = tokio::time::timeout(BOUND, read.recv()).await;
                    }
                });
                let mut response = Response::new(body);
                response.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
                Ok::<_, Infallible>(response)
            }
        });
        let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
    });
    addr
}

/// Events the SSE replica writes.
const EVENTS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_sent_events_reach_the_client_each_before_the_next_is_written() {
    let written = Arc::new(AtomicUsize::new(0));
    let (read_tx, read_rx) = mpsc::channel(EVENTS);
    let replica = sse_replica(written.clone(), read_rx).await;
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/llama-predictor-00001", 0, &[replica]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "llama", vec![target("llama-predictor-00001", 100, None)])]);

    let stream = TcpStream::connect(handle.listen_addr()).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = Request::post("/openai/v1/chat/completions")
        .header("host", "localhost")
        .body(Full::new(Bytes::from(chat("llama", "Count to four"))))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while let Some(frame) = tokio::time::timeout(BOUND, body.frame()).await.expect("the stream stalled") {
        let Ok(data) = frame.unwrap().into_data() else { continue };
        buffer.push_str(std::str::from_utf8(&data).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            // Ordering, not timing: the replica writes event i + 1 only once this one is read.
            assert_eq!(written.load(Ordering::SeqCst), events.len() + 1, "event {} came late: {event}", events.len());
            events.push(event);
            read_tx.send(events.len()).await.unwrap();
        }
    }
    let expected: Vec<String> = (0..EVENTS - 1)
        .map(|i| format!("data: {}\n\n", json!({"token": i})))
        .chain(["data: [DONE]\n\n".to_owned()])
        .collect();
    assert_eq!(events, expected);
}
