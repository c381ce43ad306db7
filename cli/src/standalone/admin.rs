//! The admin endpoint of `skiff up` (loopback only): `/status` for `skiff get`, `/metrics` for the
//! router's and activator's Prometheus metrics, `/healthz`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use super::status::Status;

/// What the admin endpoint serves.
pub struct Admin {
    /// The latest status snapshot.
    pub status: ArcSwap<Status>,
    /// Produces the metrics text.
    pub metrics: Box<dyn Fn() -> String + Send + Sync>,
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, admin: Arc<Admin>) {
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let admin = admin.clone();
        let service = service_fn(move |request| answer(admin.clone(), request));
        tokio::spawn(builder.serve_connection(TokioIo::new(stream), service).into_owned());
    }
}

async fn answer(admin: Arc<Admin>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, content_type, body) = match request.uri().path() {
        "/status" => {
            (StatusCode::OK, "application/json", serde_json::to_vec(&**admin.status.load()).expect("status serialises"))
        }
        "/metrics" => (StatusCode::OK, "application/openmetrics-text; version=1.0.0", (admin.metrics)().into_bytes()),
        "/healthz" => (StatusCode::OK, "text/plain", b"ok".to_vec()),
        path => {
            (StatusCode::NOT_FOUND, "application/json", format!(r#"{{"error":"no route for {path}"}}"#).into_bytes())
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    Ok(response)
}

/// Fetches the status from a running `skiff up`.
pub async fn fetch_status(admin: SocketAddr) -> anyhow::Result<Status> {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let response = client
        .get(format!("http://{admin}/status").parse()?)
        .await
        .map_err(|e| anyhow::anyhow!("no skiff up answers on {admin} ({e}); is it running with this --admin-port?"))?;
    let body = response.into_body().collect().await?.to_bytes();
    Ok(serde_json::from_slice(&body)?)
}
