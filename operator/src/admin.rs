//! The admin HTTP listener: `/metrics` (OpenMetrics text), `/healthz` and `/readyz`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::error::{Error, Result};

/// Binds `addr` and serves the admin endpoints in a background task; returns the bound address.
pub async fn serve(addr: SocketAddr, registry: Arc<Registry>) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await.map_err(|source| Error::Admin { addr, source })?;
    let bound = listener.local_addr().map_err(|source| Error::Admin { addr, source })?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let registry = registry.clone();
            let service = service_fn(move |request| {
                let registry = registry.clone();
                async move { Ok::<_, Infallible>(respond(&request, &registry)) }
            });
            tokio::spawn(async move {
                if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await {
                    tracing::debug!(error = %e, "admin connection ended with an error");
                }
            });
        }
    });
    Ok(bound)
}

/// The answer to one admin request.
pub fn respond<B>(request: &Request<B>, registry: &Registry) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        if let Ok(value) = content_type.parse() {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response
    };
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => {
            let mut text = String::new();
            match encode(&mut text, registry) {
                Ok(()) => reply(StatusCode::OK, "application/openmetrics-text; version=1.0.0; charset=utf-8", text),
                Err(e) => reply(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", e.to_string()),
            }
        }
        (&Method::GET, "/healthz" | "/readyz") => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let registry = Registry::default();
        let get = |path: &str| respond(&Request::get(path).body(()).unwrap(), &registry).status();
        assert_eq!(get("/healthz"), StatusCode::OK);
        assert_eq!(get("/metrics"), StatusCode::OK);
        assert_eq!(get("/nope"), StatusCode::NOT_FOUND);
    }
}
