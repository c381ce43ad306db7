//! A closed-loop load generator for REST (HTTP/1.1) and gRPC (HTTP/2, prior knowledge) calls
//! alike, ghz-style: `connections` connections of their own, each with one call in flight, a
//! warm-up and then a measured period, latencies in an HDR histogram. gRPC calls are framed here
//! over hyper's HTTP/2 client (a 5-byte length prefix before a prost message, `grpc-status` read
//! from the trailers), not through tonic's channel, so both protocols go through the same hyper
//! stack and the client's own cost stays small. Every connection counts the bytes it writes and
//! reads, for the bytes-on-the-wire figures ([`probe`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use hdrhistogram::Histogram;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::load::Stats;

pub mod proto {
    //! KServe's V2 gRPC messages, generated from `server/proto/grpc_predict_v2.proto`.
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    include!(concat!(env!("OUT_DIR"), "/inference.rs"));
}

/// The V2 gRPC infer method's path.
pub const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";
/// The V2 gRPC server-readiness method's path.
pub const SERVER_READY: &str = "/inference.GRPCInferenceService/ServerReady";

/// How a target is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 keep-alive POST.
    Rest,
    /// gRPC unary call over HTTP/2 prior knowledge (h2c).
    Grpc,
}

/// One call, sent over and over.
#[derive(Debug, Clone)]
pub struct Target {
    /// Display name.
    pub name: String,
    /// `host:port`.
    pub address: String,
    /// How to speak to it.
    pub protocol: Protocol,
    /// Request path (REST) or method path (gRPC).
    pub path: String,
    /// Content type of the request body.
    pub content_type: &'static str,
    /// Extra request headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The request body; for gRPC, the framed message ([`grpc_frame`]).
    pub body: Bytes,
}

impl Target {
    /// A REST POST of `body` (JSON unless `content_type` says otherwise).
    pub fn rest(name: &str, address: &str, path: &str, content_type: &'static str, body: Bytes) -> Target {
        Target {
            name: name.to_owned(),
            address: address.to_owned(),
            protocol: Protocol::Rest,
            path: path.to_owned(),
            content_type,
            headers: Vec::new(),
            body,
        }
    }

    /// A gRPC unary call of `method` with `message`.
    pub fn grpc(name: &str, address: &str, method: &str, message: &impl prost::Message) -> Target {
        Target {
            name: name.to_owned(),
            address: address.to_owned(),
            protocol: Protocol::Grpc,
            path: method.to_owned(),
            content_type: "application/grpc",
            headers: vec![(http::header::TE, HeaderValue::from_static("trailers"))],
            body: grpc_frame(message),
        }
    }
}

/// A gRPC message on the wire: an uncompressed flag byte, the length (big-endian u32), the message.
pub fn grpc_frame(message: &impl prost::Message) -> Bytes {
    let len = message.encoded_len();
    let mut out = BytesMut::with_capacity(5 + len);
    out.put_u8(0);
    out.put_u32(u32::try_from(len).expect("a message under 4 GiB"));
    message.encode(&mut out).expect("the buffer has room");
    out.freeze()
}

/// The message of a gRPC answer body holding one uncompressed frame.
pub fn grpc_unframe<M: prost::Message + Default>(body: &[u8]) -> Result<M, String> {
    let [0, a, b, c, d, rest @ ..] = body else { return Err(format!("not one uncompressed gRPC frame: {body:?}")) };
    let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
    if rest.len() != len {
        return Err(format!("the frame says {len} bytes, the body has {}", rest.len()));
    }
    M::decode(rest).map_err(|e| e.to_string())
}

/// Bytes written and read on one TCP connection.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    sent: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
}

impl Counters {
    /// (bytes written, bytes read) so far.
    pub fn get(&self) -> (u64, u64) {
        (self.sent.load(Ordering::Relaxed), self.received.load(Ordering::Relaxed))
    }
}

/// A TCP stream that counts its bytes.
struct Counted {
    inner: TcpStream,
    counters: Counters,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        self.counters.received.fetch_add(read as u64, Ordering::Relaxed);
        poll
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            self.counters.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &poll {
            self.counters.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// One connection to a target.
pub struct Connection {
    sender: Sender,
    /// Its byte counters.
    pub counters: Counters,
}

impl Connection {
    /// Opens a connection of the target's protocol (HTTP/2 with hyper's client defaults for gRPC).
    pub async fn open(target: &Target) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(&target.address).await?;
        stream.set_nodelay(true)?;
        let counters = Counters::default();
        let io = TokioIo::new(Counted { inner: stream, counters: counters.clone() });
        let sender = match target.protocol {
            Protocol::Rest => {
                let (sender, connection) = http1::handshake(io).await?;
                tokio::spawn(connection);
                Sender::H1(sender)
            }
            Protocol::Grpc => {
                let (sender, connection) = http2::Builder::new(TokioExecutor::new()).handshake(io).await?;
                tokio::spawn(connection);
                Sender::H2(sender)
            }
        };
        Ok(Connection { sender, counters })
    }

    /// Sends the target's call once and returns the answer's body (for gRPC, the framed message)
    /// or what went wrong: an HTTP status, a gRPC status, or the transport error.
    pub async fn call(&mut self, target: &Target) -> Result<Bytes, String> {
        let mut request =
            Request::builder().method(Method::POST).header(http::header::CONTENT_TYPE, target.content_type);
        request = match self.sender {
            Sender::H1(_) => request.uri(&target.path).header(http::header::HOST, &target.address),
            Sender::H2(_) => request.uri(format!("http://{}{}", target.address, target.path)),
        };
        for (name, value) in &target.headers {
            request = request.header(name, value);
        }
        let request = request.body(Full::new(target.body.clone())).map_err(|e| e.to_string())?;
        let response = match &mut self.sender {
            Sender::H1(sender) => sender.send_request(request).await,
            Sender::H2(sender) => match sender.ready().await {
                Ok(()) => sender.send_request(request).await,
                Err(e) => Err(e),
            },
        }
        .map_err(|e| format!("transport: {e}"))?;
        let status = response.status();
        let head_grpc_status = response.headers().get("grpc-status").cloned();
        let collected = response.into_body().collect().await.map_err(|e| format!("body: {e}"))?;
        if !status.is_success() {
            return Err(format!("HTTP {}", status.as_u16()));
        }
        if target.protocol == Protocol::Grpc {
            let code = collected.trailers().and_then(|t| t.get("grpc-status")).cloned().or(head_grpc_status);
            match code.as_ref().map(HeaderValue::as_bytes) {
                Some(b"0") => {}
                Some(code) => return Err(format!("grpc-status {}", String::from_utf8_lossy(code))),
                None => return Err("no grpc-status".to_owned()),
            }
        }
        Ok(collected.to_bytes())
    }

    /// Whether the connection can take another call.
    async fn ready(&mut self) -> bool {
        match &mut self.sender {
            Sender::H1(sender) => sender.ready().await.is_ok(),
            Sender::H2(sender) => sender.ready().await.is_ok(),
        }
    }
}

/// A new HDR histogram for latencies in microseconds: up to an hour, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_max(3_600_000_000, 3).expect("valid histogram bounds")
}

/// Runs `connections` closed loops on `target` for `warmup` and then `duration`, and returns the
/// measured period's figures (latencies in [`Stats::histogram`]).
pub async fn run(target: &Target, connections: usize, warmup: Duration, duration: Duration) -> anyhow::Result<Stats> {
    let measure_from = Instant::now() + warmup;
    let end = measure_from + duration;
    let workers: Vec<_> =
        (0..connections).map(|_| tokio::spawn(connection_loop(target.clone(), measure_from, end))).collect();
    let mut stats = Stats { seconds: duration.as_secs_f64(), histogram: Some(histogram()), ..Stats::default() };
    for worker in workers {
        let part = worker.await??;
        stats.ok += part.ok;
        stats.errors += part.errors;
        if let (Some(all), Some(one)) = (stats.histogram.as_mut(), part.histogram.as_ref()) {
            all.add(one)?;
        }
        for (kind, n) in part.failures {
            *stats.failures.entry(kind).or_default() += n;
        }
    }
    Ok(stats)
}

async fn connection_loop(target: Target, measure_from: Instant, end: Instant) -> anyhow::Result<Stats> {
    let mut stats = Stats { histogram: Some(histogram()), ..Stats::default() };
    let mut connection = Connection::open(&target).await?;
    while Instant::now() < end {
        let sent = Instant::now();
        let outcome = connection.call(&target).await;
        let done = Instant::now();
        let ok = outcome.is_ok();
        if sent >= measure_from && done <= end {
            match outcome {
                Ok(_) => {
                    stats.ok += 1;
                    let micros = u64::try_from(done.duration_since(sent).as_micros()).unwrap_or(u64::MAX);
                    if let Some(h) = stats.histogram.as_mut() {
                        h.saturating_record(micros.max(1));
                    }
                }
                Err(kind) => {
                    stats.errors += 1;
                    *stats.failures.entry(kind).or_default() += 1;
                }
            }
        }
        if !ok || !connection.ready().await {
            connection = Connection::open(&target).await?;
        }
    }
    Ok(stats)
}

/// What one call of a target carries.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Request body bytes (for gRPC, the framed message).
    pub request_body: usize,
    /// Answer body bytes.
    pub response_body: usize,
    /// TCP payload bytes written per call: headers, framing and body (connection set-up excluded).
    pub sent_per_call: f64,
    /// TCP payload bytes read per call.
    pub received_per_call: f64,
    /// The first answer's body, to check.
    pub answer: Bytes,
}

/// Opens one connection, makes one call (its answer is returned to be checked), then `calls`
/// more, and counts the bytes those moved each way.
pub async fn probe(target: &Target, calls: u32) -> anyhow::Result<Probe> {
    let mut connection = Connection::open(target).await?;
    let answer = connection.call(target).await.map_err(|e| anyhow::anyhow!("{}: {e}", target.name))?;
    let (sent0, received0) = connection.counters.get();
    for _ in 0..calls {
        connection.call(target).await.map_err(|e| anyhow::anyhow!("{}: {e}", target.name))?;
    }
    let (sent1, received1) = connection.counters.get();
    let n = f64::from(calls.max(1));
    Ok(Probe {
        request_body: target.body.len(),
        response_body: answer.len(),
        sent_per_call: (sent1 - sent0) as f64 / n,
        received_per_call: (received1 - received0) as f64 / n,
        answer,
    })
}

#[cfg(test)]
mod tests {
    use super::proto::{ModelInferRequest, ServerReadyResponse};
    use super::*;

    #[test]
    fn frames_round_trip() {
        let message = ModelInferRequest { model_name: "iris".into(), ..Default::default() };
        let framed = grpc_frame(&message);
        assert_eq!(&framed[..5], &[0, 0, 0, 0, 6]);
        assert_eq!(grpc_unframe::<ModelInferRequest>(&framed).unwrap(), message);
        assert!(grpc_unframe::<ServerReadyResponse>(&framed[..4]).is_err());
    }
}
