//! The activator proper: takes the router's requests for revisions without (enough) ready
//! capacity, pokes the autoscaler when a revision is at zero, holds each request until a replica
//! has a free slot (bounded per revision) and forwards it there.

mod metrics;
mod revision;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use hyper::body::Body;
use prometheus_client::metrics::histogram::Histogram;
use skiff_dataplane::cold_start::ColdStartSummary;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::{Holder, Poker, RevisionKey, RevisionSpec};
use skiff_http::ServeLimits;
use skiff_http::body::{BodyLimits, Budget};
use skiff_http::response::brief;
use tokio::net::TcpListener;
use tokio::sync::Notify;

pub use revision::{DEFAULT_MAX_PENDING, DEFAULT_TIMEOUT, MAX_PROGRESS_DEADLINE, RevisionConfig, RevisionStats};

use crate::REVISION_HEADER;
use crate::body::MAX_BODY_BYTES;
use crate::cold_start::ColdStartHistograms;
use crate::dispatch::{Target, dispatch};
use crate::error::{Error, Result};
use crate::forward::Forwarder;
use crate::load::Load;
use crate::response::{self, BoxError, Dialect, HttpResponse};
use metrics::Metrics;

/// One registered revision: its settings and its live counts.
struct Revision {
    config: RevisionConfig,
    /// `namespace/name`, as metrics and errors give it.
    name: String,
    /// `revision namespace/name`.
    label: String,
    load: Arc<Load>,
    /// How its bodies are read: size, time, and the process's and its own byte budgets.
    body: BodyLimits,
    wait_seconds: Histogram,
    cold_starts: ColdStartHistograms,
}

/// Request-body bytes the activator holds at once, over every revision, before 503.
pub const DEFAULT_MAX_HELD_BYTES: usize = 512 * 1024 * 1024;

/// Request-body bytes held at once for one revision before 503, so one burst cannot starve the rest.
pub const DEFAULT_REVISION_HELD_BYTES: usize = 256 * 1024 * 1024;

/// The activator's process-wide settings.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests held per revision (and waiting for unknown revisions) before 503.
    pub max_pending: usize,
    /// How long a request for a revision not registered yet waits for it (0: 404 at once). In a
    /// cluster the router may see a new revision in the routes before the activator sees its
    /// EndpointSlices; `skiff up` registers revisions before it routes to them.
    pub unknown_revision_wait: Duration,
    /// Request-body bytes held at once over every revision before 503.
    pub max_held_bytes: usize,
    /// Request-body bytes held at once for one revision before 503.
    pub revision_held_bytes: usize,
    /// Connections and client phases; the drain waits as long as a held request may take.
    pub serve: ServeLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pending: DEFAULT_MAX_PENDING,
            unknown_revision_wait: Duration::ZERO,
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            revision_held_bytes: DEFAULT_REVISION_HELD_BYTES,
            serve: ServeLimits { drain_timeout: DEFAULT_TIMEOUT, ..ServeLimits::default() },
        }
    }
}

/// Holds and forwards requests for every registered revision.
pub struct Activator {
    endpoints: Arc<Endpoints>,
    poker: Arc<dyn Poker>,
    limits: Limits,
    /// Request-body bytes held over every revision.
    held_bytes: Arc<Budget>,
    revisions: RwLock<HashMap<RevisionKey, Arc<Revision>>>,
    /// Woken when a revision is registered.
    registered: Notify,
    /// Requests waiting for their revision to be registered, bounded by `max_pending`.
    waiting_unknown: AtomicUsize,
    forwarder: Forwarder,
    metrics: Metrics,
}

impl Activator {
    /// An activator over `endpoints` (published by a replica backend or an EndpointSlice watch)
    /// that tells `poker` when a request waits at zero; it serves no revision until
    /// [`Activator::upsert_revision`] (or [`Holder::hold`], with `limits.max_pending`).
    pub fn new(endpoints: Arc<Endpoints>, poker: Arc<dyn Poker>, limits: Limits) -> Arc<Activator> {
        Arc::new(Activator {
            endpoints,
            poker,
            held_bytes: Budget::new("the activator", limits.max_held_bytes),
            limits,
            revisions: RwLock::new(HashMap::new()),
            registered: Notify::new(),
            waiting_unknown: AtomicUsize::new(0),
            forwarder: Forwarder::default(),
            metrics: Metrics::default(),
        })
    }

    /// Serves `config.key` with `config`, or updates its settings (requests already held keep
    /// theirs; the counts carry over).
    pub fn upsert_revision(&self, config: RevisionConfig) -> Result<()> {
        config.validate()?;
        let mut revisions = self.revisions.write().expect("revisions lock");
        if revisions.get(&config.key).is_some_and(|existing| existing.config == config) {
            return Ok(());
        }
        let name = config.key.to_string();
        let (load, body) = match revisions.get(&config.key) {
            Some(existing) => (existing.load.clone(), existing.body.clone()),
            None => (Load::new(self.metrics.load_gauges(&name)), self.body_limits(&name)),
        };
        let revision = Revision {
            body,
            wait_seconds: self.metrics.wait_seconds(&name),
            cold_starts: self.metrics.cold_starts(&name),
            label: format!("revision {name}"),
            name,
            load,
            config,
        };
        revisions.insert(revision.config.key.clone(), Arc::new(revision));
        self.registered.notify_waiters();
        Ok(())
    }

    /// Stops serving `revision`: new requests get 404, held ones run to their end. False when unknown.
    pub fn remove_revision(&self, revision: &RevisionKey) -> bool {
        let removed = self.revisions.write().expect("revisions lock").remove(revision).is_some();
        if removed {
            self.metrics.forget(&revision.to_string());
        }
        removed
    }

    /// What is held for `revision` now (zeros when it is unknown).
    pub fn stats(&self, revision: &RevisionKey) -> RevisionStats {
        self.revision(revision)
            .map(|r| RevisionStats { queued: r.load.queued(), in_flight: r.load.forwarded() })
            .unwrap_or_default()
    }

    /// The last and median of `revision`'s recent cold starts (first held request to its answer);
    /// `None` when it has had none or is unknown.
    pub fn cold_starts(&self, revision: &RevisionKey) -> Option<ColdStartSummary> {
        self.revision(revision)?.load.cold_start().summary()
    }

    /// The requests waiting for a replica now, per revision: what the activator reports to the
    /// autoscaler every second.
    pub fn held(&self) -> Vec<(RevisionKey, usize)> {
        let revisions = self.revisions.read().expect("revisions lock");
        revisions.iter().map(|(key, r)| (key.clone(), r.load.queued())).collect()
    }

    /// The OpenMetrics text exposition of the activator's metrics.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }

    /// Answers one request; never fails (errors become `{"error": ...}` responses, or gRPC
    /// statuses to gRPC calls).
    pub async fn handle<B>(&self, request: Request<B>) -> HttpResponse
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let dialect = Dialect::of(request.headers());
        let revision = match self.revision_of(&request).await {
            Ok(revision) => revision,
            Err(e) => {
                let (status, response) = response::answer(Err(e), dialect);
                self.metrics.answered("", status.as_u16());
                return response;
            }
        };
        let (status, response) = response::answer(self.forward(&revision, request).await, dialect);
        self.metrics.answered(&revision.name, status.as_u16());
        response
    }

    /// Serves HTTP/1.1 and h2c on `listener` until `shutdown` completes, then stops accepting and
    /// waits for held requests (each is bounded by its revision's timeout).
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<()> {
        tracing::info!(address = %listener.local_addr()?, "activator listening");
        let limits = self.limits.serve.clone();
        let handler = move |request| {
            let activator = self.clone();
            async move { activator.handle(request).await }
        };
        skiff_http::serve(listener, handler, shutdown, limits).await;
        Ok(())
    }

    /// How a new revision's bodies are read: within the process's budget and one of its own.
    fn body_limits(&self, name: &str) -> BodyLimits {
        BodyLimits {
            max_bytes: MAX_BODY_BYTES,
            timeout: self.limits.serve.body_timeout,
            budgets: vec![
                self.held_bytes.clone(),
                Budget::new(format!("revision {name}"), self.limits.revision_held_bytes),
            ],
        }
    }

    fn revision(&self, key: &RevisionKey) -> Option<Arc<Revision>> {
        self.revisions.read().expect("revisions lock").get(key).cloned()
    }

    async fn revision_of<B>(&self, request: &Request<B>) -> Result<Arc<Revision>> {
        let value = request.headers().get(REVISION_HEADER).ok_or(Error::MissingRevision)?;
        let text = value.to_str().map_err(|_| Error::BadRequest(format!("{REVISION_HEADER} is not text")))?;
        let key = RevisionKey::parse(text).ok_or_else(|| {
            Error::BadRequest(format!("{REVISION_HEADER} must be namespace/name, got {}", brief(text)))
        })?;
        match self.revision(&key) {
            Some(revision) => Ok(revision),
            None => self.wait_for(&key).await,
        }
    }

    /// Waits up to `unknown_wait` for `key` to be registered (bounded in number by `max_pending`).
    async fn wait_for(&self, key: &RevisionKey) -> Result<Arc<Revision>> {
        let unknown = || Error::UnknownRevision(key.to_string());
        if self.limits.unknown_revision_wait.is_zero() {
            return Err(unknown());
        }
        if self.waiting_unknown.fetch_add(1, Ordering::AcqRel) >= self.limits.max_pending {
            self.waiting_unknown.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::Overloaded(format!(
                "{} requests already wait for revisions to appear",
                self.limits.max_pending
            )));
        }
        let deadline = tokio::time::Instant::now() + self.limits.unknown_revision_wait;
        let found = loop {
            let registered = self.registered.notified();
            if let Some(revision) = self.revision(key) {
                break Some(revision);
            }
            if tokio::time::timeout_at(deadline, registered).await.is_err() {
                break self.revision(key);
            }
        };
        self.waiting_unknown.fetch_sub(1, Ordering::AcqRel);
        found.ok_or_else(unknown)
    }

    async fn forward<B>(&self, revision: &Revision, request: Request<B>) -> Result<HttpResponse>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let key = &revision.config.key;
        let endpoints = self.endpoints.get(key).ok_or_else(|| Error::UnknownRevision(revision.name.clone()))?;
        let target = Target {
            name: &revision.name,
            label: &revision.label,
            endpoints: &endpoints,
            load: &revision.load,
            max_pending: Some(revision.config.max_pending),
            max_queued: None,
            timeout: revision.config.timeout,
            progress_deadline: revision.config.progress_deadline,
            poker: Some((self.poker.as_ref(), key)),
            retry: true,
            body: &revision.body,
            wait_seconds: &revision.wait_seconds,
            cold_starts: Some(&revision.cold_starts),
        };
        dispatch(&self.forwarder, &target, request).await
    }
}

impl Holder for Activator {
    fn hold(&self, revision: &RevisionSpec) {
        let config = RevisionConfig {
            key: revision.key.clone(),
            timeout: revision.timeout,
            progress_deadline: revision.progress_deadline,
            max_pending: self.limits.max_pending,
        };
        if let Err(e) = self.upsert_revision(config) {
            tracing::error!(revision = %revision.key, error = %e, "the activator refused the revision's settings");
        }
    }

    fn release(&self, revision: &RevisionKey) {
        self.remove_revision(revision);
    }
}
