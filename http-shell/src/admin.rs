//! The admin answers every Skiff binary gives on its admin port: `GET /healthz` (alive),
//! `GET /readyz` (200 when ready, else 503 with the reason), `GET /metrics` (OpenMetrics text).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;

use crate::response;

/// OpenMetrics' content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The answer to `request`: `not_ready` is `None` when ready, else why not; `metrics` encodes the
/// metrics (called only for `/metrics`).
pub fn respond<B>(
    request: &Request<B>,
    not_ready: Option<&str>,
    metrics: impl FnOnce() -> String,
) -> Response<Full<Bytes>> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/healthz") => response::bytes(StatusCode::OK, "text/plain", "ok\n"),
        (&Method::GET, "/readyz") => match not_ready {
            None => response::bytes(StatusCode::OK, "text/plain", "ok\n"),
            Some(why) => response::bytes(StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("{why}\n")),
        },
        (&Method::GET, "/metrics") => response::bytes(StatusCode::OK, OPENMETRICS, metrics()),
        (method, path) => response::json_value(
            StatusCode::NOT_FOUND,
            &serde_json::json!({ "error": format!("no admin endpoint {method} {path}") }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_readiness_metrics_and_the_rest() {
        let get = |path: &str| Request::get(path).body(()).unwrap();
        assert_eq!(respond(&get("/healthz"), Some("starting"), String::new).status(), StatusCode::OK);
        assert_eq!(respond(&get("/readyz"), Some("starting"), String::new).status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(respond(&get("/readyz"), None, String::new).status(), StatusCode::OK);
        let metrics = respond(&get("/metrics"), None, || "m 1\n".into());
        assert_eq!(metrics.headers()["content-type"], OPENMETRICS);
        assert_eq!(respond(&get("/nope"), None, String::new).status(), StatusCode::NOT_FOUND);
    }
}
