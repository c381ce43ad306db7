//! The HTTP shell of both modes: accept loop, HTTP/1.1 and h2c connections, graceful drain.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::response::HttpResponse;

/// Serves `handler` on `listener` until `shutdown` completes, then stops accepting, closes idle
/// keep-alive connections and waits for in-flight requests; with a `drain_timeout`, connections
/// still busy after it are abandoned.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    handler: F,
    shutdown: impl Future<Output = ()>,
    drain_timeout: Option<Duration>,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = HttpResponse> + Send + 'static,
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
    match drain_timeout {
        None => graceful.shutdown().await,
        Some(limit) => {
            if tokio::time::timeout(limit, graceful.shutdown()).await.is_err() {
                tracing::warn!(?limit, "drain timed out; closing busy connections");
                return;
            }
        }
    }
    tracing::info!("drained: every in-flight request answered");
}
