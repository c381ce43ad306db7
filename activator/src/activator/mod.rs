//! The activator proper: takes the router's requests for revisions without (enough) ready
//! capacity, pokes the autoscaler when a revision is at zero, holds each request until a replica
//! has a free slot (bounded per revision) and forwards it there.

mod metrics;
mod revision;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use http::Request;
use hyper::body::Body;
use prometheus_client::metrics::histogram::Histogram;
use skiff_api::endpoints::Endpoints;
use tokio::net::TcpListener;

pub use revision::{DEFAULT_MAX_PENDING, DEFAULT_TIMEOUT, RevisionConfig, RevisionStats};

use crate::REVISION_HEADER;
use crate::dispatch::{Target, dispatch};
use crate::error::{Error, Result};
use crate::forward::Forwarder;
use crate::load::Load;
use crate::response::{self, BoxError, HttpResponse};
use metrics::Metrics;

/// Tells the autoscaler that a request is waiting for a revision with no ready replica.
pub trait Poker: Send + Sync {
    /// A request for `revision` arrived while it has no ready replica; decide now.
    fn poke(&self, revision: &str);
}

/// One registered revision: its settings and its live counts.
struct Revision {
    config: RevisionConfig,
    label: String,
    load: Arc<Load>,
    wait_seconds: Histogram,
}

/// Holds and forwards requests for every registered revision.
pub struct Activator {
    endpoints: Arc<Endpoints>,
    poker: Arc<dyn Poker>,
    revisions: RwLock<HashMap<String, Arc<Revision>>>,
    forwarder: Forwarder,
    metrics: Metrics,
}

impl Activator {
    /// An activator over `endpoints` (published by the replica backend) that tells `poker` when a
    /// request waits at zero; it serves no revision until [`Activator::upsert_revision`].
    pub fn new(endpoints: Arc<Endpoints>, poker: Arc<dyn Poker>) -> Arc<Activator> {
        Arc::new(Activator {
            endpoints,
            poker,
            revisions: RwLock::new(HashMap::new()),
            forwarder: Forwarder::default(),
            metrics: Metrics::default(),
        })
    }

    /// Serves `config.name` with `config`, or updates its settings (requests already held keep
    /// theirs; the counts carry over).
    pub fn upsert_revision(&self, config: RevisionConfig) -> Result<()> {
        config.validate()?;
        let mut revisions = self.revisions.write().expect("revisions lock");
        let load = match revisions.get(&config.name) {
            Some(existing) => existing.load.clone(),
            None => Load::new(self.metrics.load_gauges(&config.name)),
        };
        let revision = Revision {
            label: format!("revision {}", config.name),
            wait_seconds: self.metrics.wait_seconds(&config.name),
            load,
            config,
        };
        revisions.insert(revision.config.name.clone(), Arc::new(revision));
        Ok(())
    }

    /// Stops serving `revision`: new requests get 404, held ones run to their end. False when unknown.
    pub fn remove_revision(&self, revision: &str) -> bool {
        let removed = self.revisions.write().expect("revisions lock").remove(revision).is_some();
        if removed {
            self.metrics.forget(revision);
        }
        removed
    }

    /// What is held for `revision` now (zeros when it is unknown).
    pub fn stats(&self, revision: &str) -> RevisionStats {
        self.revision(revision)
            .map(|r| RevisionStats { queued: r.load.queued(), in_flight: r.load.forwarded() })
            .unwrap_or_default()
    }

    /// The OpenMetrics text exposition of the activator's metrics.
    pub fn metrics_text(&self) -> String {
        self.metrics.encode()
    }

    /// Answers one request; never fails (errors become `{"error": ...}` responses).
    pub async fn handle<B>(&self, request: Request<B>) -> HttpResponse
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let revision = match self.revision_of(&request) {
            Ok(revision) => revision,
            Err(e) => {
                let response = response::error(&e);
                self.metrics.answered("", response.status().as_u16());
                return response;
            }
        };
        let response = self.forward(&revision, request).await.unwrap_or_else(|e| response::error(&e));
        self.metrics.answered(&revision.config.name, response.status().as_u16());
        response
    }

    /// Serves HTTP/1.1 and h2c on `listener` until `shutdown` completes, then stops accepting and
    /// waits for held requests (each is bounded by its revision's timeout).
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<()> {
        tracing::info!(address = %listener.local_addr()?, "activator listening");
        let handler = move |request| {
            let activator = self.clone();
            async move { activator.handle(request).await }
        };
        skiff_http::serve(listener, handler, shutdown, None).await;
        Ok(())
    }

    fn revision(&self, name: &str) -> Option<Arc<Revision>> {
        self.revisions.read().expect("revisions lock").get(name).cloned()
    }

    fn revision_of<B>(&self, request: &Request<B>) -> Result<Arc<Revision>> {
        let name = request.headers().get(REVISION_HEADER).ok_or(Error::MissingRevision)?;
        let name = name.to_str().map_err(|_| Error::BadRequest(format!("{REVISION_HEADER} is not text")))?;
        self.revision(name).ok_or_else(|| Error::UnknownRevision(name.to_owned()))
    }

    async fn forward<B>(&self, revision: &Revision, request: Request<B>) -> Result<HttpResponse>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let name = revision.config.name.as_str();
        let endpoints = self.endpoints.get(name).ok_or_else(|| Error::UnknownRevision(name.to_owned()))?;
        let target = Target {
            name,
            label: &revision.label,
            endpoints: &endpoints,
            load: &revision.load,
            max_pending: Some(revision.config.max_pending),
            max_queued: None,
            timeout: revision.config.timeout,
            poker: Some(self.poker.as_ref()),
            retry_connect: true,
            wait_seconds: &revision.wait_seconds,
        };
        dispatch(&self.forwarder, &target, request).await
    }
}
