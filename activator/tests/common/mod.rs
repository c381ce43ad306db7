//! Test harness: tiny hyper upstream servers on 127.0.0.1 that answer their id and hold requests
//! to `/hold...` until released, counting how many they hold at once; and an HTTP client.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// A replica stand-in.
pub struct Upstream {
    /// What it answers as `id`.
    pub id: String,
    /// Where it listens.
    pub addr: SocketAddr,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    received: AtomicUsize,
    arrivals: Mutex<Vec<String>>,
    gate: Semaphore,
}

impl Upstream {
    /// Starts answering on a free loopback port.
    pub async fn start(id: &str) -> Arc<Upstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = Arc::new(Upstream {
            id: id.to_owned(),
            addr: listener.local_addr().unwrap(),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            received: AtomicUsize::new(0),
            arrivals: Mutex::new(Vec::new()),
            gate: Semaphore::new(0),
        });
        let server = upstream.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let server = server.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| server.clone().answer(request));
                    let _ =
                        auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        upstream
    }

    async fn answer(self: Arc<Self>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_in_flight.fetch_max(now, Ordering::AcqRel);
        self.received.fetch_add(1, Ordering::AcqRel);
        let path = request.uri().path().to_owned();
        self.arrivals.lock().unwrap().push(path.clone());
        let saw_revision = request.headers().contains_key("x-skiff-revision");
        let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        if path.starts_with("/hold") {
            self.gate.acquire().await.unwrap().forget();
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        let answer = json!({ "id": self.id, "path": path, "body": String::from_utf8_lossy(&body), "saw_revision": saw_revision });
        let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
        Ok(response)
    }

    /// Lets `n` held requests (present or future) go.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }

    /// Requests it holds or answers now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// The most requests it ever had at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(Ordering::Acquire)
    }

    /// The paths of the requests it received, in arrival order.
    pub fn arrival_order(&self) -> Vec<String> {
        self.arrivals.lock().unwrap().clone()
    }

    /// Requests it received.
    pub fn received(&self) -> usize {
        self.received.load(Ordering::Acquire)
    }
}

/// A loopback address where nothing listens.
pub async fn dead_addr() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// A response: status, headers, body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request over HTTP/1.1 (or h2c with `http2`), with `x-skiff-revision` when given.
pub async fn send_with(
    http2: bool,
    method: Method,
    url: &str,
    revision: Option<&str>,
    body: impl Into<Bytes>,
) -> Result<Reply, String> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).http2_only(http2).build_http();
    let mut request = Request::builder().method(method).uri(url);
    if let Some(revision) = revision {
        request = request.header("x-skiff-revision", revision);
    }
    let request = request.body(Full::new(body.into())).unwrap();
    let response = client.request(request).await.map_err(|e| format!("{e:?}"))?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Reply { status: parts.status, headers: parts.headers, body })
}

/// GET over HTTP/1.1, panicking on transport errors.
pub async fn get(url: &str, revision: Option<&str>) -> Reply {
    send_with(false, Method::GET, url, revision, Bytes::new()).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// POST over HTTP/1.1, panicking on transport errors.
pub async fn post(url: &str, revision: Option<&str>, body: &str) -> Reply {
    send_with(false, Method::POST, url, revision, body.to_owned()).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Polls `condition` until it holds; panics (naming `what`) only if that takes over 20 s, i.e. something hangs.
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "still waiting for {what} after 20 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A server that answers every request with server-sent events over chunked HTTP/1.1, as an LLM
/// server streams tokens: the head and a first event at once, then the last event and the end of
/// the body only once [`StreamingUpstream::finish`] is called.
pub struct StreamingUpstream {
    pub addr: SocketAddr,
    finish: Arc<tokio::sync::Notify>,
}

impl StreamingUpstream {
    pub async fn start() -> StreamingUpstream {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let finish = Arc::new(tokio::sync::Notify::new());
        let notified = finish.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let notified = notified.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        let Ok(n @ 1..) = stream.read(&mut buf).await else { return };
                        head.extend_from_slice(&buf[..n]);
                    }
                    let chunk = |data: &str| {
                        let event = format!("data: {data}\n\n");
                        format!("{:x}\r\n{event}\r\n", event.len())
                    };
                    let first = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{}",
                        chunk("first")
                    );
                    stream.write_all(first.as_bytes()).await.unwrap();
                    notified.notified().await;
                    let last = format!("{}0\r\n\r\n", chunk("[DONE]"));
                    let _ = stream.write_all(last.as_bytes()).await;
                });
            }
        });
        StreamingUpstream { addr, finish }
    }

    /// Lets the open stream write its last event and end.
    pub fn finish(&self) {
        self.finish.notify_one();
    }
}

/// Sends a GET and returns its response with the body unread (a stream to read frame by frame).
pub async fn open(url: &str, revision: Option<&str>) -> Response<Incoming> {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder().uri(url);
    if let Some(revision) = revision {
        request = request.header("x-skiff-revision", revision);
    }
    client.request(request.body(Full::new(Bytes::new())).unwrap()).await.unwrap()
}

/// The answer to a POST of `body` to `url`, its body unread.
pub async fn open_post(url: &str, body: &'static str) -> Response<Incoming> {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = Request::post(url).header("content-type", "application/json").body(Full::new(Bytes::from(body)));
    client.request(request.unwrap()).await.unwrap()
}

/// The next data frame of a streamed body, as text.
pub async fn next_data(body: &mut Incoming) -> Option<String> {
    loop {
        let frame = body.frame().await?.unwrap();
        if let Ok(data) = frame.into_data() {
            return Some(String::from_utf8_lossy(&data).into_owned());
        }
    }
}
