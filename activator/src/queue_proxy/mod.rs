//! Queue-proxy mode, the sidecar in front of a custom container (Knative's queue-proxy): at most
//! `containerConcurrency` requests reach the container at once, a bounded number wait, the rest get
//! 503; `/metrics` exposes the in-flight gauge the autoscaler reads and `/healthz` answers from the
//! container's own readiness. Requests go through the same [`dispatch`] as the activator's, with
//! the container as the one replica. On shutdown it stops accepting and drains.
//!
//! It also carries KServe's agent's two features for custom containers: the request logger
//! (`predictor.logger`, [`log`]: inference requests and their responses as CloudEvents to a sink)
//! and the batcher (`predictor.batcher`, [`batcher`]: concurrent V1 predict requests combined
//! into one request to the container, its predictions split back to each caller).

pub mod batcher;
mod config;
pub mod log;
mod metrics;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Body;
use serde_json::Value;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::RevisionEndpoints;
use skiff_http::logger::{Half, Logger};
use tokio::net::{TcpListener, TcpStream};

pub use config::QueueProxyConfig;

use skiff_http::body::{BodyLimits, Budget, Reservation};

use crate::body::MAX_BODY_BYTES;
use crate::dispatch::{Admitted, Target, admit, dispatch, forward, read};
use crate::error::{Error, Result};
use crate::forward::{Forwarder, Outgoing};
use crate::load::Load;
use crate::response::{self, BoxError, Dialect, HttpResponse};
use batcher::{Answer, Batcher};
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
    logger: Option<Logger>,
    batcher: Option<Batcher>,
    draining: AtomicBool,
}

impl QueueProxy {
    /// A queue-proxy in front of `config.upstream`. Called within a tokio runtime: the logger and
    /// the batcher start their tasks on it.
    pub fn new(config: QueueProxyConfig) -> Result<Arc<QueueProxy>> {
        config.validate()?;
        let upstream =
            RevisionEndpoints::new(RevisionKey::new("local", "upstream"), config.admission.container_concurrency);
        upstream.set_ready(vec![upstream.replica(config.upstream)]);
        let metrics = Metrics::default();
        let logger = config.logger_config()?.map(|c| Logger::start(c, metrics.logger().clone()));
        let readiness_path = config.readiness_path()?;
        let batching = config.batching();
        Ok(Arc::new_cyclic(|proxy: &Weak<QueueProxy>| QueueProxy {
            readiness_path,
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
            logger,
            batcher: batching.map(|settings| Batcher::start(settings, proxy.clone())),
            draining: AtomicBool::new(false),
            config,
        }))
    }

    /// Answers one request: `GET /metrics`, `GET /healthz`, or anything else proxied to the
    /// container, logged ([`log::logged`]) and batched ([`batcher::batchable`]) when they are on.
    pub async fn handle<B>(&self, mut request: Request<B>) -> HttpResponse
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
        let target = self.target();
        let dialect = Dialect::of(request.headers());
        let logger = self.logger.as_ref().filter(|_| log::logged(request.method(), request.headers()));
        let batcher = self.batcher.as_ref().filter(|_| batcher::batchable(request.method(), request.uri().path()));
        let (status, response) = match (logger, batcher) {
            (None, None) => response::answer(dispatch(&self.forwarder, &target, request).await, dialect),
            (Some(logger), batcher) => {
                let id = log::request_id(request.headers_mut());
                let result = self.inference(&target, request, Some((logger, &id)), batcher).await;
                let (status, response) = response::answer(result, dialect);
                (status, log::tee(response, logger, id))
            }
            (None, batcher) => response::answer(self.inference(&target, request, None, batcher).await, dialect),
        };
        self.metrics.answered(status.as_u16());
        response
    }

    /// Where requests go: the container, through its concurrency limit.
    fn target(&self) -> Target<'_> {
        Target {
            name: "upstream",
            label: &self.label,
            endpoints: &self.upstream,
            load: &self.load,
            max_pending: None,
            max_queued: Some(self.config.admission.max_queued()),
            timeout: self.config.timeout(),
            progress_deadline: None,
            poker: None,
            retry: false,
            body: &self.body,
            wait_seconds: self.metrics.wait_seconds(),
            cold_starts: None,
        }
    }

    /// A request logged or that may be batched: its body is read here, logged as the request of
    /// `log`'s id, then either handed to the batcher (a V1 instances list) or forwarded.
    async fn inference<B>(
        &self,
        target: &Target<'_>,
        request: Request<B>,
        log: Option<(&Logger, &str)>,
        batcher: Option<&Batcher>,
    ) -> Result<HttpResponse>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let admitted = admit(target)?;
        let (parts, body) = request.into_parts();
        let (body, held) = read(target, &admitted, &parts.headers, body).await?;
        if let Some((logger, id)) = log {
            logger.log(Half::Request, id, log::content_type(&parts.headers), body.clone());
        }
        let instances = batcher.and_then(|batcher| Some((batcher, batcher::instances(&body)?)));
        let Some((batcher, instances)) = instances else {
            return forward(&self.forwarder, target, admitted, &Outgoing::new(&parts, body), held).await;
        };
        drop(body);
        self.batched(target, batcher, parts.uri.path(), instances, admitted, held).await
    }

    /// A caller's instances through the batcher, bounded by its deadline.
    async fn batched(
        &self,
        target: &Target<'_>,
        batcher: &Batcher,
        path: &str,
        instances: Vec<Value>,
        admitted: Admitted,
        held: Reservation,
    ) -> Result<HttpResponse> {
        let deadline = admitted.deadline();
        let timed_out = || Error::UpstreamTimeout { target: target.label.to_owned(), timeout: target.timeout };
        batcher.submit(path, instances, Box::new((admitted, held)), deadline, timed_out).await
    }

    /// Sends a batch's combined request to the container and reads its whole answer (at most
    /// [`MAX_BODY_BYTES`]), for the batcher to split.
    pub(crate) async fn send_batch(&self, path: &str, body: Bytes) -> Answer {
        let target = self.target();
        let request = Request::post(path).header(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let parts = match request.body(()) {
            Ok(request) => request.into_parts().0,
            Err(e) => return Answer::error(StatusCode::BAD_REQUEST, &format!("the path {path:?}: {e}")),
        };
        let outgoing = Outgoing::new(&parts, body);
        let sent = forward(&self.forwarder, &target, Admitted::on_behalf(&target), &outgoing, Reservation::default());
        let response = match sent.await {
            Ok(response) => response,
            Err(e) => return Answer::of_error(&e).await,
        };
        let (parts, mut body) = response.into_parts();
        let mut whole = BytesMut::new();
        while let Some(frame) = body.frame().await {
            let unreadable = |why: String| {
                Answer::error(StatusCode::BAD_GATEWAY, &format!("the container's answer to a batch: {why}"))
            };
            match frame {
                Ok(frame) => {
                    if let Some(data) = frame.data_ref() {
                        if whole.len() + data.len() > MAX_BODY_BYTES {
                            return unreadable(format!("more than {MAX_BODY_BYTES} bytes"));
                        }
                        whole.extend_from_slice(data);
                    }
                }
                Err(e) => return unreadable(e.to_string()),
            }
        }
        // Only what describes any share of the body: its length is each caller's own.
        let headers = [header::CONTENT_TYPE, header::RETRY_AFTER]
            .into_iter()
            .filter_map(|name| Some((name.clone(), parts.headers.get(&name)?.clone())))
            .collect();
        Answer { status: parts.status, headers, body: whole.freeze() }
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
            container_concurrency = self.config.admission.container_concurrency,
            max_queued = self.config.admission.max_queued(),
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
