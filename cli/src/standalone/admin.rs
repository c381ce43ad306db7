//! The admin endpoint of `skiff up` (loopback by default): `/status` for `skiff get`, `/metrics`
//! for the router's and activator's Prometheus metrics, `/healthz`, the autoscaler's journal of a
//! revision at `/autoscaler/journal/<namespace>/<name>` (what its decider was fed and answered),
//! and the models web app under `/models`.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::Path;
use axum::response::IntoResponse;
use axum::routing::get;
use bytes::Bytes;
use http::StatusCode;
use http::header::CONTENT_TYPE;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;

use skiff_dataplane::RevisionKey;
use skiff_dataplane::runner::journal::Step;

use super::status::Status;

/// What the admin endpoint serves.
pub struct Admin {
    /// The latest status snapshot.
    pub status: ArcSwap<Status>,
    /// Produces the metrics text.
    pub metrics: Box<dyn Fn() -> String + Send + Sync>,
    /// The autoscaler's journal of a revision, if it is autoscaled.
    pub journal: Box<JournalOf>,
}

/// Reads the autoscaler's journal of a revision.
pub type JournalOf = dyn Fn(&RevisionKey) -> Option<Vec<Step>> + Send + Sync;

/// The admin routes, with `web` (the models web app) beside them.
pub fn routes(admin: Arc<Admin>, web: Router) -> Router {
    let (status, journal) = (admin.clone(), admin.clone());
    Router::new()
        .route("/status", get(move || async move { axum::Json((**status.status.load()).clone()) }))
        .route(
            "/autoscaler/journal/{namespace}/{name}",
            get(move |Path((namespace, name)): Path<(String, String)>| async move {
                match (journal.journal)(&RevisionKey::new(&namespace, &name)) {
                    Some(steps) => axum::Json(steps).into_response(),
                    None => (
                        StatusCode::NOT_FOUND,
                        axum::Json(serde_json::json!({ "error": format!("no revision {namespace}/{name} is autoscaled") })),
                    )
                        .into_response(),
                }
            }),
        )
        .route(
            "/metrics",
            get(move || async move {
                ([(CONTENT_TYPE, "application/openmetrics-text; version=1.0.0")], (admin.metrics)())
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .merge(web)
        .fallback(|uri: http::Uri| async move {
            (StatusCode::NOT_FOUND, axum::Json(serde_json::json!({ "error": format!("no route for {}", uri.path()) })))
                .into_response()
        })
}

/// One OpenMetrics exposition from several: each part's `# EOF` dropped, one at the end (a
/// second `# EOF` in the middle makes Prometheus refuse the whole scrape).
pub fn exposition(parts: &[String]) -> String {
    let mut text: String =
        parts.iter().flat_map(|part| part.lines()).filter(|l| *l != "# EOF").flat_map(|l| [l, "\n"]).collect();
    text.push_str("# EOF\n");
    text
}

/// Serves `routes` with the HTTP shell's limits until the task is dropped.
pub async fn serve(listener: TcpListener, routes: Router) {
    skiff_web::serve(listener, routes, std::future::pending(), skiff_http::ServeLimits::default()).await;
}

/// `--admin`'s value: `HOST:PORT`, or a port alone on 127.0.0.1.
pub fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    match text.parse::<u16>() {
        Ok(port) => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
        Err(_) => text.parse().map_err(|_| format!("{text:?} is neither an address (127.0.0.1:9091) nor a port")),
    }
}

/// Fetches the status from a running `skiff up`.
pub async fn fetch_status(admin: SocketAddr) -> anyhow::Result<Status> {
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let nobody = || format!("no skiff up answers on {admin} (is it running, with --admin {admin}?)");
    let response = client.get(format!("http://{admin}/status").parse()?).await.with_context(nobody)?;
    let status = response.status();
    let body = response.into_body().collect().await.with_context(nobody)?.to_bytes();
    anyhow::ensure!(
        status == StatusCode::OK,
        "{admin} answered {status} to GET /status: not a skiff up admin endpoint?"
    );
    serde_json::from_slice(&body)
        .with_context(|| format!("{admin} answered GET /status with something else than skiff up's status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_is_an_address_or_a_port_on_loopback() {
        assert_eq!(parse_addr("9091"), Ok(SocketAddr::from(([127, 0, 0, 1], 9091))));
        assert_eq!(parse_addr("127.0.0.2:80"), Ok(SocketAddr::from(([127, 0, 0, 2], 80))));
        assert_eq!(parse_addr("[::1]:0"), Ok("[::1]:0".parse().unwrap()));
        assert!(parse_addr("localhost").unwrap_err().contains("\"localhost\" is neither"));
    }

    #[test]
    fn expositions_join_with_one_eof_at_the_end() {
        let joined = exposition(&["a_total 1\n# EOF\n".into(), "b 2\n# EOF\n".into()]);
        assert_eq!(joined, "a_total 1\nb 2\n# EOF\n");
    }
}
