//! The HTTP shell: routes and handlers; the accept loop and drain are `skiff-http`'s.

mod handlers;
mod routes;

use skiff_http::ServeLimits;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

pub use handlers::App;
pub use routes::{Route, route};

/// Serves `app` on `listener` under `limits` until `shutdown` completes, then turns readiness
/// off, serves on for the drain delay (so that load balancers stop sending first), stops
/// accepting, lets in-flight requests finish (closing idle keep-alive connections at once) and
/// returns; connections still busy after the drain timeout are abandoned.
pub async fn serve(listener: TcpListener, app: Arc<App>, shutdown: impl Future<Output = ()>, limits: ServeLimits) {
    let draining = app.clone();
    let shutdown = async move {
        shutdown.await;
        draining.start_draining();
    };
    let handler = move |request| handlers::handle(app.clone(), request);
    skiff_http::serve(listener, handler, shutdown, limits).await;
}
