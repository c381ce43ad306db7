//! The HTTP shell: accept loop, HTTP/1.1 and h2c connections, graceful drain.

mod handlers;
mod response;
mod routes;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

pub use handlers::App;
pub use routes::{Route, route};

/// Serves `app` on `listener` until `shutdown` completes, then stops accepting, lets in-flight
/// requests finish (closing idle keep-alive connections at once) and returns; connections still
/// busy after `drain_timeout` are abandoned.
pub async fn serve(listener: TcpListener, app: Arc<App>, shutdown: impl Future<Output = ()>, drain_timeout: Duration) {
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
                let app = app.clone();
                let service = service_fn(move |request| handlers::handle(app.clone(), request));
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
    app.start_draining();
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("drained: every in-flight request answered"),
        () = tokio::time::sleep(drain_timeout) => tracing::warn!(?drain_timeout, "drain timed out; closing busy connections"),
    }
}
