//! The HTTP shell: routes and handlers; the accept loop and drain are `skiff-http`'s.

mod handlers;
mod routes;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

pub use handlers::App;
pub use routes::{Route, route};

/// Serves `app` on `listener` until `shutdown` completes, then turns readiness off, serves on
/// for `delay` (so that load balancers stop sending first), stops accepting, lets in-flight
/// requests finish (closing idle keep-alive connections at once) and returns; connections still
/// busy after `drain_timeout` are abandoned.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
    delay: Duration,
    drain_timeout: Duration,
) {
    let draining = app.clone();
    let shutdown = async move {
        shutdown.await;
        draining.start_draining();
        tokio::time::sleep(delay).await;
    };
    let handler = move |request| handlers::handle(app.clone(), request);
    skiff_http::serve(listener, handler, shutdown, Some(drain_timeout)).await;
}
