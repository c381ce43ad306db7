//! The HTTP shell: routes and handlers, and the dispatch of gRPC calls to [`crate::grpc`]; the
//! accept loop and drain are `skiff-http`'s.

mod handlers;
mod routes;

use http_body_util::Either;
use skiff_http::ServeLimits;
use std::future::Future;
use std::sync::Arc;
use tokio::net::TcpListener;

pub use handlers::{App, EXTENSIONS, PLATFORM, SERVER_NAME, SERVER_VERSION, predict};
pub use routes::{ModelRef, Route, route};

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
    let handler = move |request: http::Request<hyper::body::Incoming>| {
        let app = app.clone();
        async move {
            if skiff_http::grpc::is_grpc(request.headers()) {
                crate::grpc::handle(app, request).await.map(Either::Right)
            } else {
                handlers::handle(app, request).await.map(Either::Left)
            }
        }
    };
    skiff_http::serve(listener, handler, shutdown, limits).await;
}
