//! The node cache's HTTP server (`skiff-model-cache`). Every `POST /v1/models` lists the store
//! with the caller's own credentials before anything is served ([`crate::Cache::get`] does), so
//! a model in the cache reaches only callers whose credentials read it now; the answer carries a
//! ticket that holds the entry (never evicted while the ticket lives) and authorises reading its
//! files: only regular files inside the entry, opened beneath it without following any link
//! ([`crate::beneath`]). Errors become HTTP answers in one place ([`Refusal`]'s
//! `IntoResponse`). `GET /metrics` counts the outcomes and bytes ([`super::metrics`]);
//! `GET /healthz` answers `ok`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use ring::rand::{SecureRandom, SystemRandom};
use tokio::net::TcpListener;

use super::metrics::Metrics;
use super::wire::{ErrorBody, FORWARDED, File, MAX_REQUEST_BYTES, ModelAnswer, ModelRequest, WireError};
use crate::beneath::Beneath;
use crate::download::{self, Plan};
use crate::env::StoreEnv;
use crate::error::Error;
use crate::guard::{self, Reach};
use crate::{Cache, Fetcher, Lease};

/// How the node cache serves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How downloads run.
    pub plan: Plan,
    /// The bound on one fetch.
    pub timeout: Duration,
    /// How long a ticket lives after its last use.
    pub ticket_ttl: Duration,
    /// Whether stores on loopback or link-local addresses are reached for callers (tests only:
    /// on a node those are the node's own services).
    pub allow_loopback: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            plan: Plan::default(),
            timeout: crate::fetcher::DEFAULT_TIMEOUT,
            ticket_ttl: Duration::from_secs(600),
            allow_loopback: false,
        }
    }
}

struct Ticket {
    key: String,
    lease: Lease,
    expires: Instant,
}

struct Node {
    cache: Cache,
    settings: Settings,
    tickets: Mutex<HashMap<String, Ticket>>,
    random: SystemRandom,
    metrics: Metrics,
}

/// Serves `cache` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, cache: Cache, settings: Settings) -> std::io::Result<()> {
    axum::serve(listener, router(cache, settings)).await
}

/// The node cache's routes.
pub fn router(cache: Cache, settings: Settings) -> Router {
    let node = Arc::new(Node {
        cache,
        settings,
        tickets: Mutex::default(),
        random: SystemRandom::new(),
        metrics: Metrics::default(),
    });
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(|State(node): State<Arc<Node>>| async move { node.metrics.encode() }))
        .route("/v1/models", post(model))
        .route("/v1/models/{key}", delete(release))
        .route("/v1/models/{key}/{*path}", get(file))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
        .with_state(node)
}

/// Why a request was not served.
enum Refusal {
    /// The fetcher's error (the store's answer, a transfer, the node's disk).
    Fetch(Error),
    /// The node cache's own refusal, with its status.
    Node(StatusCode, String),
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Self {
        Refusal::Fetch(error)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            Refusal::Fetch(error) => {
                let status = match &error {
                    Error::Uri { .. } | Error::Config(_) => StatusCode::BAD_REQUEST,
                    Error::NotFound { .. } => StatusCode::NOT_FOUND,
                    Error::Denied { .. } | Error::Unreachable { .. } => StatusCode::FORBIDDEN,
                    Error::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
                    Error::Archive { .. } => StatusCode::UNPROCESSABLE_ENTITY,
                    Error::Transfer { .. } => StatusCode::BAD_GATEWAY,
                    Error::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
                    Error::Disk { .. } => StatusCode::INSUFFICIENT_STORAGE,
                };
                (status, ErrorBody { error: error.to_string(), fetch: Some(WireError::from(&error)) })
            }
            Refusal::Node(status, error) => (status, ErrorBody { error, fetch: None }),
        };
        (status, axum::Json(body)).into_response()
    }
}

async fn model(State(node): State<Arc<Node>>, body: Bytes) -> Result<axum::Json<ModelAnswer>, Refusal> {
    let answer = answer(&node, &body).await;
    match &answer {
        Ok(answer) => node.metrics.answered(answer.downloaded),
        Err(Refusal::Fetch(error)) => node.metrics.failed(error),
        Err(Refusal::Node(..)) => node.metrics.refused(),
    }
    answer.map(axum::Json)
}

async fn answer(node: &Node, body: &[u8]) -> Result<ModelAnswer, Refusal> {
    let request: ModelRequest = serde_json::from_slice(body)
        .map_err(|e| Refusal::Node(StatusCode::BAD_REQUEST, format!("the request is not a model request: {e}")))?;
    let env: BTreeMap<&str, &str> = request
        .env
        .iter()
        .filter(|(name, _)| FORWARDED.contains(&name.as_str()))
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let env = StoreEnv::from_lookup(|name| env.get(name).map(|v| (*v).to_owned()))?;
    let refused = guard::refused_hosts(&request.uri, &env);
    if !refused.is_empty() && !node.settings.allow_loopback {
        return Err(Refusal::Node(
            StatusCode::FORBIDDEN,
            format!(
                "the node cache does not reach {} for a caller (the node's own or link-local addresses)",
                refused.join(", ")
            ),
        ));
    }
    let mut fetcher = Fetcher::new(env);
    if !node.settings.allow_loopback {
        fetcher.reach = Reach::NotTheNode;
    }
    fetcher.plan = node.settings.plan;
    fetcher.timeout = node.settings.timeout;
    let lease = node.cache.get(&fetcher, &request.uri).await?;
    let files = files_of(&lease.dir)?;
    let key = lease.dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let report = lease.report.clone();
    tracing::info!(uri = %report.uri, cached = report.cached, downloaded = report.downloaded, bytes = report.bytes,
        seconds = report.seconds, "model served");
    let mut token = [0u8; 24];
    node.random
        .fill(&mut token)
        .map_err(|_| Refusal::Node(StatusCode::INTERNAL_SERVER_ERROR, "no random ticket".into()))?;
    let ticket: String = token.iter().map(|b| format!("{b:02x}")).collect();
    let mut tickets = node.tickets.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    tickets.retain(|_, t| t.expires > now);
    tickets.insert(ticket.clone(), Ticket { key: key.clone(), lease, expires: now + node.settings.ticket_ttl });
    Ok(ModelAnswer {
        key,
        ticket,
        uri: report.uri,
        objects: report.objects,
        downloaded: report.downloaded,
        cached: report.cached,
        seconds: report.seconds,
        files,
    })
}

/// The bearer token of a request.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "))
}

/// The folder of the ticket a request carries, if it holds `key`; its life is extended.
fn held(node: &Node, headers: &HeaderMap, key: &str) -> Result<std::path::PathBuf, Refusal> {
    let denied =
        || Refusal::Node(StatusCode::UNAUTHORIZED, format!("no ticket for model {key}: POST /v1/models first"));
    let token = bearer(headers).ok_or_else(denied)?;
    let mut tickets = node.tickets.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    tickets.retain(|_, t| t.expires > now);
    let ticket = tickets.get_mut(token).filter(|t| t.key == key).ok_or_else(denied)?;
    ticket.expires = now + node.settings.ticket_ttl;
    Ok(ticket.lease.dir.clone())
}

async fn file(
    State(node): State<Arc<Node>>,
    UrlPath((key, path)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Refusal> {
    let dir = held(&node, &headers, &key)?;
    let missing = || Refusal::Node(StatusCode::NOT_FOUND, format!("model {key} has no file {path:?}"));
    let file = download::inside(&dir, &path).ok_or_else(missing)?;
    let relative = file.strip_prefix(&dir).unwrap_or(&file).to_owned();
    let opened = tokio::task::spawn_blocking(move || Beneath::open(&dir)?.open_file(&relative))
        .await
        .map_err(|_| missing())?
        .map_err(|_| missing())?;
    let size = opened.metadata().map_err(Error::disk(&file))?.len();
    let opened = tokio::fs::File::from_std(opened);
    node.metrics.sent(size);
    let body = Body::from_stream(tokio_util::io::ReaderStream::with_capacity(opened, 256 << 10));
    Ok(([(header::CONTENT_LENGTH, size.to_string())], body).into_response())
}

/// Ends a ticket: the entry may be evicted again.
async fn release(State(node): State<Arc<Node>>, UrlPath(key): UrlPath<String>, headers: HeaderMap) -> StatusCode {
    if let Some(token) = bearer(&headers) {
        let mut tickets = node.tickets.lock().unwrap_or_else(|e| e.into_inner());
        if tickets.get(token).is_some_and(|t| t.key == key) {
            tickets.remove(token);
        }
    }
    StatusCode::NO_CONTENT
}

/// Every file under `dir`, with its path relative to it.
fn files_of(dir: &Path) -> Result<Vec<File>, Error> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_owned()];
    while let Some(folder) = folders.pop() {
        for item in std::fs::read_dir(&folder).map_err(Error::disk(&folder))? {
            let item = item.map_err(Error::disk(&folder))?;
            let kind = item.file_type().map_err(Error::disk(item.path()))?;
            if kind.is_dir() {
                folders.push(item.path());
            } else if kind.is_file() {
                let size = item.metadata().map_err(Error::disk(item.path()))?.len();
                let relative = item.path().strip_prefix(dir).unwrap_or(&item.path()).to_string_lossy().into_owned();
                files.push(File { path: relative, size });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}
