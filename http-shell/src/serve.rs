//! The accept loop, HTTP/1.1 and h2c connections under [`ServeLimits`], graceful drain.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};

use crate::body::Held;
use crate::limits::ServeLimits;

/// Serves `handler` on `listener` until `shutdown` completes; then serves on for the drain delay,
/// closes the listener, closes idle connections and waits up to the drain timeout for in-flight
/// requests. Returns whether every request was answered.
pub async fn serve<F, Fut, B>(
    listener: TcpListener,
    handler: F,
    shutdown: impl Future<Output = ()>,
    limits: ServeLimits,
) -> bool
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = Arc::new(builder(&limits));
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let (closing, closed) = watch::channel(false);
    let accept = async {
        loop {
            let permit = connections.clone().acquire_owned().await.expect("the semaphore is never closed");
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let connection =
                Connection { builder: builder.clone(), closed: closed.clone(), header_timeout: limits.header_timeout };
            tokio::spawn(connection.run(stream, handler.clone(), permit));
        }
    };
    let stop = async {
        shutdown.await;
        if !limits.drain_delay.is_zero() {
            tracing::info!(delay = ?limits.drain_delay, "shutting down: serving on for the drain delay");
            tokio::time::sleep(limits.drain_delay).await;
        }
    };
    tokio::select! {
        () = accept => unreachable!("the accept loop never ends"),
        () = stop => {}
    }
    drop(listener);
    tracing::info!("stopped accepting; draining in-flight requests");
    let _ = closing.send(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(limits.drain_timeout, connections.acquire_many(all)).await.is_ok();
    if drained {
        tracing::info!("drained: every in-flight request answered");
    } else {
        tracing::warn!(drain_timeout = ?limits.drain_timeout, "drain timed out; closing busy connections");
    }
    drained
}

/// HTTP/2 flow-control window per stream.
const H2_STREAM_WINDOW: u32 = 2 << 20;
/// HTTP/2 flow-control window per connection.
const H2_CONNECTION_WINDOW: u32 = 4 << 20;
/// Largest HTTP/2 frame the server takes.
const H2_MAX_FRAME: u32 = 256 << 10;

/// hyper's builder with the HTTP/2 bounds. HTTP/1.1 gets no timer of hyper's: the connection's
/// own head deadline ([`Connection`]) already covers what hyper's header timeout would, from
/// accept rather than from version detection, without a second timer per request.
fn builder(limits: &ServeLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_h2_streams)
        // A 1 MiB tensor (gRPC raw contents) fits the windows whole, so its sender never waits a
        // round trip for a WINDOW_UPDATE, and arrives in few frames. The connection window also
        // bounds what one connection can make the server buffer before the body is read (and
        // counted in the memory budget): 4 MiB.
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_frame_size(H2_MAX_FRAME)
        .keep_alive_interval(limits.header_timeout)
        .keep_alive_timeout(limits.header_timeout);
    builder
}

/// One accepted connection: served until it ends, the server closes, or it spends the header
/// timeout with nothing in flight. (hyper's own header timer would start only once hyper-util has
/// read enough to tell HTTP/1.1 from HTTP/2, and a graceful close does not end a half-read first
/// head, so the deadline is kept here, from accept, and ends the connection outright.)
struct Connection {
    builder: Arc<auto::Builder<TokioExecutor>>,
    closed: watch::Receiver<bool>,
    header_timeout: Duration,
}

impl Connection {
    async fn run<F, Fut, B>(mut self, stream: TcpStream, handler: F, permit: OwnedSemaphorePermit)
    where
        F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Response<B>> + Send + 'static,
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::default());
        let counted = activity.clone();
        let service = service_fn(move |request| {
            let busy = counted.start();
            let response = handler(request);
            async move { Ok::<_, Infallible>(response.await.map(|body| Held::new(body, busy))) }
        });
        let connection = self.builder.serve_connection(TokioIo::new(stream), service);
        tokio::pin!(connection);
        let mut closing = false;
        loop {
            tokio::select! {
                ended = connection.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                _ = self.closed.wait_for(|closed| *closed), if !closing => {
                    connection.as_mut().graceful_shutdown();
                    closing = true;
                }
                () = activity.idle_for(self.header_timeout) => {
                    tracing::debug!(timeout = ?self.header_timeout, "closing a connection that sent no complete request head in time");
                    break;
                }
            }
        }
        drop(permit);
    }
}

/// The requests in flight on one connection (from their head to their response's last frame), and
/// a wake-up whenever that number changes.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    changed: Notify,
}

/// One request in flight on a connection, until dropped.
struct Busy(Arc<Activity>);

impl Activity {
    fn start(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
        Busy(self.clone())
    }

    /// Completes once nothing has been in flight for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let changed = self.changed.notified();
            if self.in_flight.load(Ordering::Acquire) == 0 {
                if tokio::time::timeout(limit, changed).await.is_err() {
                    return;
                }
            } else {
                changed.await;
            }
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use http_body_util::Full;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::oneshot;

    use super::*;

    async fn slow_ok(_request: Request<Incoming>) -> Response<Full<Bytes>> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Response::new(Full::new(Bytes::from_static(b"done")))
    }

    fn limits() -> ServeLimits {
        ServeLimits { drain_timeout: Duration::from_secs(5), ..ServeLimits::default() }
    }

    async fn start(limits: ServeLimits) -> (std::net::SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server =
            tokio::spawn(async move { serve(listener, slow_ok, async { stopped.await.unwrap() }, limits).await });
        (addr, stop, server)
    }

    /// A request in flight when shutdown starts is answered; the listener is closed at once.
    #[tokio::test]
    async fn shutdown_drains_in_flight_requests_and_closes_the_listener() {
        let (addr, stop, server) = start(limits()).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("done"), "{answer}");
        assert!(server.await.unwrap(), "drained");
        assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
    }

    /// During the drain delay new connections are still served; after it the listener closes.
    #[tokio::test]
    async fn the_drain_delay_keeps_serving_before_the_listener_closes() {
        let (addr, stop, server) = start(ServeLimits { drain_delay: Duration::from_millis(400), ..limits() }).await;
        stop.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(server.await.unwrap(), "drained");
        assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
    }

    /// With a drain timeout, a request that outlives it is abandoned and serve says so.
    #[tokio::test]
    async fn drain_timeout_abandons_busy_connections() {
        let (addr, stop, server) = start(ServeLimits { drain_timeout: Duration::from_millis(50), ..limits() }).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.send(()).unwrap();
        assert!(!server.await.unwrap(), "not drained");
    }

    /// Reads until the server closes the connection; returns what came and when it closed.
    async fn until_closed(client: &mut TcpStream) -> (String, Instant) {
        let mut answer = Vec::new();
        let _ = client.read_to_end(&mut answer).await;
        (String::from_utf8_lossy(&answer).into_owned(), Instant::now())
    }

    /// A client dribbling its headers a byte at a time is cut once the header timeout passes.
    #[tokio::test]
    async fn a_client_dribbling_its_headers_is_cut_at_the_header_timeout() {
        let timeout = Duration::from_millis(600);
        let (addr, _stop, _server) = start(ServeLimits { header_timeout: timeout, ..limits() }).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        let started = Instant::now();
        let (mut reader, mut writer) = client.split();
        let dribble = async {
            for byte in b"GET / HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
                if writer.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let mut answer = Vec::new();
        tokio::select! {
            () = dribble => panic!("the whole dribble was accepted"),
            _ = reader.read_to_end(&mut answer) => {}
        }
        let cut = started.elapsed();
        assert!(cut >= timeout, "cut after {cut:?}, before the timeout");
        assert!(!String::from_utf8_lossy(&answer).contains("200"), "no answer to a partial request");
    }

    /// A keep-alive connection with nothing in flight is closed after the header timeout.
    #[tokio::test]
    async fn an_idle_keep_alive_connection_is_closed() {
        let idle = Duration::from_millis(300);
        let (addr, _stop, _server) = start(ServeLimits { header_timeout: idle, ..limits() }).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let answered = Instant::now();
        let (answer, closed) = until_closed(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        let after = closed - answered;
        assert!(after >= idle, "closed while a request was in flight or too early: {after:?}");
    }

    /// A client that sends one byte and stops (hyper-util still waiting to tell HTTP/1.1 from
    /// HTTP/2, before hyper's own header timer runs) is cut at the header timeout too.
    #[tokio::test]
    async fn a_client_stuck_before_the_version_is_known_is_cut() {
        let timeout = Duration::from_millis(400);
        let (addr, _stop, _server) = start(ServeLimits { header_timeout: timeout, ..limits() }).await;
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"P").await.unwrap();
        let started = Instant::now();
        let (answer, _) = tokio::time::timeout(Duration::from_secs(5), until_closed(&mut client)).await.expect("cut");
        assert!(started.elapsed() >= timeout / 2 && answer.is_empty(), "{answer:?} after {:?}", started.elapsed());
    }

    /// A response still streaming counts as in flight: the connection is not cut under it.
    #[tokio::test]
    async fn a_long_response_is_not_cut_by_the_header_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let slow_body = |_request: Request<Incoming>| async {
            let frames = futures_stream_of_slow_frames();
            Response::new(http_body_util::StreamBody::new(frames))
        };
        let limits = ServeLimits { header_timeout: Duration::from_millis(200), ..limits() };
        tokio::spawn(serve(listener, slow_body, std::future::pending(), limits));
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        let (answer, _) = until_closed(&mut client).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("1\r\ne\r\n") && answer.ends_with("0\r\n\r\n"), "the whole body: {answer}");
    }

    /// Five one-byte frames 100 ms apart: half a second of streaming.
    fn futures_stream_of_slow_frames()
    -> impl futures::Stream<Item = Result<hyper::body::Frame<Bytes>, Infallible>> + Send + Unpin + 'static {
        use futures::StreamExt;
        Box::pin(futures::stream::iter(["a", "b", "c", "d", "e"]).then(|piece| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(hyper::body::Frame::data(Bytes::from_static(piece.as_bytes())))
        }))
    }

    /// An HTTP/2 client is told the stream cap in the server's settings.
    #[tokio::test]
    async fn http2_clients_are_told_the_stream_cap() {
        let (addr, _stop, _server) = start(ServeLimits { max_h2_streams: 3, ..limits() }).await;
        let (mut client, connection) = h2::client::handshake(TcpStream::connect(addr).await.unwrap()).await.unwrap();
        tokio::spawn(connection);
        let request = Request::get(format!("http://{addr}/")).body(()).unwrap();
        let (response, _) = client.send_request(request, true).unwrap();
        assert_eq!(response.await.unwrap().status(), 200);
        assert_eq!(client.current_max_send_streams(), 3);
    }

    /// Past the connection cap a new connection waits in the backlog until one closes.
    #[tokio::test]
    async fn connections_past_the_cap_wait_for_one_to_close() {
        let (addr, _stop, _server) = start(ServeLimits { max_connections: 1, ..limits() }).await;
        let mut first = TcpStream::connect(addr).await.unwrap();
        first.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut second = TcpStream::connect(addr).await.unwrap();
        second.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").await.unwrap();
        let mut buffer = [0u8; 64];
        let waited = tokio::time::timeout(Duration::from_millis(600), second.read(&mut buffer)).await;
        assert!(waited.is_err(), "the second connection was served while the first was open");
        drop(first);
        let (answer, _) = until_closed(&mut second).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
}
