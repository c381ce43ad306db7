//! The accept loop, HTTP/1.1 and h2c connections, graceful drain.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Body, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

/// Serves `handler` on `listener` until `shutdown` completes, then closes the listener, closes
/// idle keep-alive connections and waits for in-flight requests; with a `drain_timeout`,
/// connections still busy after it are abandoned. Returns whether every request was answered.
pub async fn serve<F, Fut, B>(
    listener: TcpListener,
    handler: F,
    shutdown: impl Future<Output = ()>,
    drain_timeout: Option<Duration>,
) -> bool
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let service = service_fn(move |request| {
                    let response = handler(request);
                    async move { Ok::<_, Infallible>(response.await) }
                });
                let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service).into_owned());
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("stopped accepting; draining in-flight requests");
    let drained = match drain_timeout {
        None => {
            graceful.shutdown().await;
            true
        }
        Some(limit) => tokio::time::timeout(limit, graceful.shutdown()).await.is_ok(),
    };
    if drained {
        tracing::info!("drained: every in-flight request answered");
    } else {
        tracing::warn!(?drain_timeout, "drain timed out; closing busy connections");
    }
    drained
}

#[cfg(test)]
mod tests {
    use http_body_util::Full;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::oneshot;

    use super::*;

    async fn slow_ok(_request: Request<Incoming>) -> Response<Full<Bytes>> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Response::new(Full::new(Bytes::from_static(b"done")))
    }

    /// A request in flight when shutdown starts is answered; the listener is closed at once.
    #[tokio::test]
    async fn shutdown_drains_in_flight_requests_and_closes_the_listener() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, slow_ok, async { stopped.await.unwrap() }, None));

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

    /// With a drain timeout, a request that outlives it is abandoned and serve says so.
    #[tokio::test]
    async fn drain_timeout_abandons_busy_connections() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let limit = Some(Duration::from_millis(50));
        let server = tokio::spawn(serve(listener, slow_ok, async { stopped.await.unwrap() }, limit));
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.send(()).unwrap();
        assert!(!server.await.unwrap(), "not drained");
    }
}
