//! The admin HTTP listener: `/metrics` (OpenMetrics text), `/healthz`, `/readyz`, and, on the
//! leader, the autoscaler's endpoints for the activator ([`AutoscalerApi`]) and the journal of a
//! revision's decider (`GET /autoscaler/journal/<namespace>/<name>`: what it was fed and answered).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use skiff_dataplane::RevisionKey;

pub use crate::autoscaler::api::AutoscalerGate;
use crate::autoscaler::api::{AutoscalerApi, MAX_BODY};

/// Where the journal of a revision's decider is served.
const JOURNAL_PATH: &str = "/autoscaler/journal/";
use crate::error::{Error, Result};

/// Binds `addr` and serves the admin endpoints in a background task; returns the bound address.
pub async fn serve(addr: SocketAddr, registry: Arc<Registry>, autoscaler: AutoscalerGate) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await.map_err(|source| Error::Admin { addr, source })?;
    let bound = listener.local_addr().map_err(|source| Error::Admin { addr, source })?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (registry, autoscaler) = (registry.clone(), autoscaler.clone());
            let service = service_fn(move |request: Request<Incoming>| {
                let (registry, autoscaler) = (registry.clone(), autoscaler.clone());
                async move {
                    if request.method() == Method::POST && AutoscalerApi::serves(request.uri().path()) {
                        return Ok::<_, Infallible>(autoscaler_call(request, autoscaler.get()).await);
                    }
                    if let Some(revision) = journal_of(&request) {
                        return Ok(journal(&revision, autoscaler.get()));
                    }
                    Ok(respond(&request, &registry))
                }
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

/// Answers a call to the autoscaler: 503 unless this replica leads, 413 past the body limit.
async fn autoscaler_call(request: Request<Incoming>, api: Option<&Arc<AutoscalerApi>>) -> Response<Full<Bytes>> {
    let Some(api) = api else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, "not the leader: the autoscaler runs in the leader".into());
    };
    let path = request.uri().path().to_owned();
    let (parts, body) = request.into_parts();
    let Ok(body) = Limited::new(body, MAX_BODY).collect().await.map(|b| b.to_bytes()) else {
        return reply(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is over {MAX_BODY} bytes or broken"));
    };
    match api.handle(&path, &parts.headers, &body).await {
        Ok(()) => Response::builder().status(StatusCode::NO_CONTENT).body(Full::default()).unwrap_or_default(),
        Err((status, message)) => reply(status, message),
    }
}

/// The revision a `GET /autoscaler/journal/<namespace>/<name>` asks for.
fn journal_of<B>(request: &Request<B>) -> Option<RevisionKey> {
    let rest = request.uri().path().strip_prefix(JOURNAL_PATH)?;
    let (namespace, name) = rest.split_once('/')?;
    (request.method() == Method::GET && !name.contains('/')).then(|| RevisionKey::new(namespace, name))
}

/// The journal of `revision`'s decider: 503 unless this replica leads, 404 when it is not autoscaled.
fn journal(revision: &RevisionKey, api: Option<&Arc<AutoscalerApi>>) -> Response<Full<Bytes>> {
    let Some(api) = api else {
        return reply(StatusCode::SERVICE_UNAVAILABLE, "not the leader: the autoscaler runs in the leader".into());
    };
    match api.journal(revision) {
        Some(steps) => json(StatusCode::OK, serde_json::to_vec(&steps).unwrap_or_default()),
        None => reply(StatusCode::NOT_FOUND, format!("no revision {revision} is autoscaled")),
    }
}

/// `{"error": message}` with `status`.
fn reply(status: StatusCode, message: String) -> Response<Full<Bytes>> {
    json(status, serde_json::json!({ "error": message }).to_string().into_bytes())
}

/// A JSON `body` with `status`.
fn json(status: StatusCode, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
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

    #[test]
    fn the_journal_path_names_one_revision_and_a_follower_has_none() {
        let of =
            |method: Method, path: &str| journal_of(&Request::builder().method(method).uri(path).body(()).unwrap());
        assert_eq!(
            of(Method::GET, "/autoscaler/journal/e2e/iris-predictor-00001"),
            Some(RevisionKey::new("e2e", "iris-predictor-00001"))
        );
        assert_eq!(of(Method::POST, "/autoscaler/journal/e2e/iris-predictor-00001"), None);
        assert_eq!(of(Method::GET, "/autoscaler/journal/e2e"), None);
        assert_eq!(of(Method::GET, "/autoscaler/journal/e2e/a/b"), None);
        let response = journal(&RevisionKey::new("e2e", "r"), None);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
