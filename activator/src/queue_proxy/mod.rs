//! Queue-proxy mode, the sidecar in front of a custom container (Knative's queue-proxy): at most
//! `containerConcurrency` requests reach the container at once, a bounded number wait, the rest get
//! 503; `/metrics` exposes the in-flight gauge the autoscaler reads and `/healthz` answers from the
//! container's own readiness. Requests go through the same [`dispatch`] as the activator's, with
//! the container as the one replica. On shutdown it stops accepting and drains.

mod config;
mod metrics;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{Method, Request, StatusCode};
use hyper::body::Body;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::RevisionEndpoints;
use tokio::net::{TcpListener, TcpStream};

pub use config::QueueProxyConfig;

use skiff_http::body::{BodyLimits, Budget};

use crate::body::MAX_BODY_BYTES;
use crate::dispatch::{Target, dispatch};
use crate::error::{Error, Result};
use crate::forward::Forwarder;
use crate::load::Load;
use crate::response::{self, BoxError, Dialect, HttpResponse};
use metrics::Metrics;

/// How long a readiness check of the container may take (Knative's default probe timeout).
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The queue-proxy's state, shared by every connection.
pub struct QueueProxy {
    config: QueueProxyConfig,
    readiness_path: Option<PathAndQuery>,
    upstream: Arc<RevisionEndpoints>,
    label: String,
    load: Arc<Load>,
    forwarder: Forwarder,
    body: BodyLimits,
    metrics: Metrics,
    draining: AtomicBool,
}

impl QueueProxy {
    /// A queue-proxy in front of `config.upstream`.
    pub fn new(config: QueueProxyConfig) -> Result<Arc<QueueProxy>> {
        config.validate()?;
        let upstream = RevisionEndpoints::new(RevisionKey::new("local", "upstream"), config.container_concurrency);
        upstream.set_ready(vec![upstream.replica(config.upstream)]);
        let metrics = Metrics::default();
        Ok(Arc::new(QueueProxy {
            readiness_path: config.readiness_path()?,
            label: format!("upstream {}", config.upstream),
            load: Load::new(metrics.load_gauges()),
            upstream,
            forwarder: Forwarder::default(),
            body: BodyLimits {
                max_bytes: MAX_BODY_BYTES,
                timeout: config.serve_limits().body_timeout,
                budgets: vec![Budget::new("the queue-proxy", config.max_held_bytes)],
            },
            metrics,
            draining: AtomicBool::new(false),
            config,
        }))
    }

    /// Answers one request: `GET /metrics`, `GET /healthz`, or anything else proxied to the container.
    pub async fn handle<B>(&self, request: Request<B>) -> HttpResponse
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        if request.method() == Method::GET {
            match request.uri().path() {
                "/metrics" => {
                    return response::bytes(
                        StatusCode::OK,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        self.metrics_text(),
                    );
                }
                "/healthz" => {
                    return match self.ready().await {
                        Ok(()) => response::json(StatusCode::OK, &serde_json::json!({ "ready": true })),
                        Err(e) => response::error(&e, Dialect::Json),
                    };
                }
                _ => {}
            }
        }
        let target = Target {
            name: "upstream",
            label: &self.label,
            endpoints: &self.upstream,
            load: &self.load,
            max_pending: None,
            max_queued: Some(self.config.max_queued()),
            timeout: self.config.timeout(),
            poker: None,
            retry: false,
            body: &self.body,
            wait_seconds: self.metrics.wait_seconds(),
            cold_starts: None,
        };
        let dialect = Dialect::of(request.headers());
        let (status, response) = response::answer(dispatch(&self.forwarder, &target, request).await, dialect);
        self.metrics.answered(status.as_u16());
        response
    }

    /// Ready when not draining and the container is: its readiness path answers 2xx, or, without
    /// one, it accepts a connection.
    pub async fn ready(&self) -> Result<()> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Error::NotReady("shutting down".into()));
        }
        let addr = self.config.upstream;
        let not_ready = |why: String| Error::NotReady(format!("upstream {addr} {why}"));
        match &self.readiness_path {
            Some(path) => match tokio::time::timeout(PROBE_TIMEOUT, self.forwarder.probe(addr, path)).await {
                Ok(Ok(status)) if status.is_success() => Ok(()),
                Ok(Ok(status)) => Err(not_ready(format!("answered {status} on {path}"))),
                Ok(Err(e)) => Err(not_ready(e.to_string())),
                Err(_) => Err(not_ready(format!("did not answer {path} within {PROBE_TIMEOUT:?}"))),
            },
            None => match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(not_ready(format!("refuses connections: {e}"))),
                Err(_) => Err(not_ready(format!("did not accept a connection within {PROBE_TIMEOUT:?}"))),
            },
        }
    }

    /// The OpenMetrics text exposition.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }

    /// Serves HTTP/1.1 and h2c on `listener` until `shutdown` completes, then turns readiness
    /// off, serves on for the drain delay, stops accepting and drains for up to the drain timeout.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<()> {
        tracing::info!(
            address = %listener.local_addr()?,
            upstream = %self.config.upstream,
            container_concurrency = self.config.container_concurrency,
            max_queued = self.config.max_queued(),
            "listening"
        );
        let limits = self.config.serve_limits();
        let shutdown = {
            let proxy = self.clone();
            async move {
                shutdown.await;
                proxy.draining.store(true, Ordering::Release);
            }
        };
        let handler = move |request| {
            let proxy = self.clone();
            async move { proxy.handle(request).await }
        };
        skiff_http::serve(listener, handler, shutdown, limits).await;
        Ok(())
    }
}

/// Binds `config`'s port and serves until `shutdown` completes, then drains.
pub async fn run(config: QueueProxyConfig, shutdown: impl Future<Output = ()>) -> Result<()> {
    let proxy = QueueProxy::new(config)?;
    let listener = TcpListener::bind(SocketAddr::new(proxy.config.bind, proxy.config.port)).await?;
    proxy.serve(listener, shutdown).await
}
