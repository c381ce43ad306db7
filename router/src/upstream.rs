//! Connections to replicas and activators. HTTP/1.1 requests go over hyper HTTP/1.1 connections
//! kept alive in one pool per router (a mutex held only to push or pop). Such a connection is driven
//! inside the request's own task while it is in use — no task and no channel per request, and the
//! request head and a buffered body leave in one write — and idles unpolled in the pool; one found
//! closed when taken is dropped. (Pingora's proxy spends a task, a channel and a separate header
//! write per request here; `docs/benchmarks.md` has the comparison.) HTTP/2 requests go over one
//! shared, multiplexed HTTP/2 connection per address ([`h2`]).

mod h2;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::channel::Channel;
use http_body_util::{Either, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A request body: buffered whole, or streamed from the client as it arrives.
pub(crate) type UpstreamBody = Either<Full<Bytes>, Channel<Bytes, Infallible>>;

type Connection = http1::Connection<TokioIo<TcpStream>, UpstreamBody>;

/// Idle pooled connections to replicas and activators are closed after this long: well before
/// their own idle cut (`skiff_http::ServeLimits::header_timeout`, 20 s), so the router never sends
/// on a connection the upstream is closing.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections kept per upstream address and thread.
const MAX_IDLE_PER_ADDR: usize = 128;
/// How often a thread's pool drops connections idle past their timeout.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// How long a connection that just answered may take to want the next request before it is dropped.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);

pub(crate) use h2::Http2Pool;

/// How an exchange with an upstream failed.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// No connection could be made: nothing was sent.
    Connect(String),
    /// The connection was not made in time: nothing was sent.
    ConnectTimeout,
    /// The connection failed after it was made: the request may have been sent.
    Failed(String),
}

/// A connection in use by one request: an HTTP/1.1 one of its own, or a stream on a shared HTTP/2 one.
pub(crate) enum Upstream {
    /// A kept-alive HTTP/1.1 connection, given back to the pool after the answer.
    Http1(Http1),
    /// A handle on the address's shared HTTP/2 connection.
    Http2(h2::Http2),
}

/// One kept-alive HTTP/1.1 connection, in use by one request at a time.
pub(crate) struct Http1 {
    addr: SocketAddr,
    sender: http1::SendRequest<UpstreamBody>,
    connection: Pin<Box<Connection>>,
    /// Taken from the pool rather than opened for this request.
    reused: bool,
    /// Set when the connection ended; it is not given back.
    closed: bool,
}

struct Idle {
    upstream: Http1,
    since: Instant,
}

/// The router's upstream connections: idle HTTP/1.1 ones by address, and the shared HTTP/2 ones.
#[derive(Default)]
pub(crate) struct Pool {
    inner: Mutex<Idles>,
    http2: Http2Pool,
}

#[derive(Default)]
struct Idles {
    idle: HashMap<SocketAddr, Vec<Idle>>,
    swept: Option<Instant>,
}

impl Upstream {
    /// A connection to `addr` from `pool` (HTTP/2 prior knowledge when `http2`), or a new one.
    pub(crate) async fn get(
        pool: &Pool,
        addr: SocketAddr,
        http2: bool,
        connect_timeout: Duration,
    ) -> Result<Upstream, UpstreamError> {
        if http2 {
            return pool.http2.get(addr, connect_timeout).await.map(Upstream::Http2);
        }
        if let Some(upstream) = pool.take(addr) {
            return Ok(Upstream::Http1(upstream));
        }
        let stream = connect(addr, connect_timeout).await?;
        let (sender, connection) =
            http1::handshake(TokioIo::new(stream)).await.map_err(|e| UpstreamError::Connect(e.to_string()))?;
        Ok(Upstream::Http1(Http1 { addr, sender, connection: Box::pin(connection), reused: false, closed: false }))
    }

    /// True when the connection was used before this request (it may have been closed since).
    pub(crate) fn reused(&self) -> bool {
        match self {
            Upstream::Http1(upstream) => upstream.reused,
            Upstream::Http2(upstream) => upstream.reused,
        }
    }

    /// Runs `work` while driving the connection; fails when the connection ends first. (An HTTP/2
    /// connection drives itself; a failure shows in `work`'s own result.)
    pub(crate) async fn drive<F: Future>(&mut self, work: F) -> Result<F::Output, UpstreamError> {
        match self {
            Upstream::Http1(upstream) => upstream.drive(work).await,
            Upstream::Http2(_) => Ok(work.await),
        }
    }

    /// Sends the request and waits for the response head.
    pub(crate) async fn send(
        &mut self,
        request: http::Request<UpstreamBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
        match self {
            Upstream::Http1(upstream) => upstream.send(request).await,
            Upstream::Http2(upstream) => upstream.send(request).await,
        }
    }

    /// Gives an HTTP/1.1 connection back to `pool` once it can take the next request (at once after
    /// a whole response), unless it ended. (An HTTP/2 stream has nothing to give back.)
    pub(crate) async fn release(self, pool: &Pool) {
        if let Upstream::Http1(upstream) = self {
            upstream.release(pool).await;
        }
    }
}

/// A TCP connection to `addr`, without Nagle's delay.
async fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, UpstreamError> {
    let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| UpstreamError::ConnectTimeout)?
        .map_err(|e| UpstreamError::Connect(e.to_string()))?;
    stream.set_nodelay(true).map_err(|e| UpstreamError::Connect(e.to_string()))?;
    Ok(stream)
}

impl Http1 {
    async fn drive<F: Future>(&mut self, work: F) -> Result<F::Output, UpstreamError> {
        let out = drive(&mut self.connection, work).await;
        self.closed |= out.is_err();
        out
    }

    async fn send(
        &mut self,
        request: http::Request<UpstreamBody>,
    ) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
        let sent = self.sender.send_request(request);
        let sent = drive(&mut self.connection, sent).await;
        self.closed |= sent.is_err();
        match sent? {
            Ok(response) => Ok(response),
            Err(e) => {
                self.closed = true;
                Err(UpstreamError::Failed(e.to_string()))
            }
        }
    }

    async fn release(mut self, pool: &Pool) {
        if self.closed {
            return;
        }
        let ready = drive(&mut self.connection, self.sender.ready());
        if let Ok(Ok(Ok(()))) = tokio::time::timeout(RELEASE_TIMEOUT, ready).await {
            pool.put(self);
        }
    }

    /// True when the idle connection is still open and wants a request (polled without waiting).
    fn still_open(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        self.connection.as_mut().poll(&mut cx).is_pending() && self.sender.is_ready()
    }
}

/// Runs `work` while driving `connection`; fails when the connection ends first.
async fn drive<F: Future>(connection: &mut Pin<Box<Connection>>, work: F) -> Result<F::Output, UpstreamError> {
    tokio::pin!(work);
    tokio::select! {
        biased;
        out = &mut work => Ok(out),
        ended = connection.as_mut() => Err(UpstreamError::Failed(match ended {
            Ok(()) => "the upstream closed the connection".to_owned(),
            Err(e) => e.to_string(),
        })),
    }
}

impl Pool {
    fn idles(&self) -> std::sync::MutexGuard<'_, Idles> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self, addr: SocketAddr) -> Option<Http1> {
        loop {
            // Checked outside the lock; one found closed is dropped and the next tried.
            let Idle { mut upstream, since } = self.idles().idle.get_mut(&addr)?.pop()?;
            if since.elapsed() < POOL_IDLE_TIMEOUT && upstream.still_open() {
                upstream.reused = true;
                return Some(upstream);
            }
        }
    }

    fn put(&self, upstream: Http1) {
        let now = Instant::now();
        let mut idles = self.idles();
        let idles = &mut *idles;
        if idles.swept.is_none_or(|at| now.duration_since(at) >= SWEEP_INTERVAL) {
            idles.swept = Some(now);
            for idle in idles.idle.values_mut() {
                idle.retain(|i| now.duration_since(i.since) < POOL_IDLE_TIMEOUT);
            }
            idles.idle.retain(|_, idle| !idle.is_empty());
        }
        let idle = idles.idle.entry(upstream.addr).or_default();
        if idle.len() < MAX_IDLE_PER_ADDR {
            idle.push(Idle { upstream, since: now });
        }
    }
}
