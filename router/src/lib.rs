//! Skiff's router: the Pingora ingress of the data plane. It finds the InferenceService a request is
//! for (by Host, `/serving/<namespace>/<name>/` path, or model name), splits traffic across its
//! revisions by weight or tag, and sends each request straight to the least-loaded ready replica
//! with room, or to the activator (with `x-skiff-revision`) when the revision has none.
//!
//! Requests to the router itself (a Host or `:authority` that names no service) get its own
//! server-level V2 answers ([`v2`]: live, ready, metadata) and OpenAI's model list ([`openai`]);
//! gRPC calls to it are routed by the model their first message names ([`peek`]), and OpenAI
//! requests (`/openai/v1/chat/completions`, ...) by the `"model"` of their JSON body ([`openai`]),
//! both read without holding the stream back.
//!
//! Pure cores: [`table`] (routing), [`split`] (weighted choice), [`peek`], [`openai`] and [`v2`]; the request path (Pingora's
//! server and HTTP/1 sessions towards clients, pooled hyper connections towards replicas and
//! activators) and the server thread are thin shells around them. On Kubernetes ([`cluster`], the `skiff-router`
//! binary) routes come from InferenceServices and endpoints from EndpointSlices. Routes are rebuilt by the caller and swapped in with
//! [`Router::publish`] without blocking requests.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use skiff_router::{Router, RouterConfig};
//! let endpoints = Arc::new(skiff_dataplane::endpoints::Endpoints::default());
//! let router = Router::new(RouterConfig::default(), endpoints)?;
//! let handle = router.start()?; // serves on its own threads
//! router.publish(vec![]); // whenever the routes change
//! handle.wait(); // until SIGTERM; or handle.shutdown()
//! # Ok::<(), skiff_router::Error>(())
//! ```

pub mod cluster;
mod config;
mod downstream;
mod error;
mod failure;
pub mod graph;
pub mod metrics;
pub mod openai;
pub mod peek;
mod proxy;
mod server;
pub mod split;
pub mod table;
mod upstream;
pub mod v2;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arc_swap::ArcSwap;
use prometheus_client::registry::Registry;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::{Endpoints, RevisionEndpoints};

pub use config::RouterConfig;
pub use downstream::DownstreamLimits;
pub use error::{Error, Result};
pub use metrics::{RouterMetrics, Via};
pub use server::RouterHandle;
pub use table::{Resolved, RouteTable, ServiceRoute};

pub use skiff_api::serving::{DEFAULT_TIMEOUT, REVISION_HEADER};
/// The router's own liveness path, answered without proxying.
pub const HEALTHZ_PATH: &str = "/healthz";

/// The router: its configuration, the published route table, and its metrics. Clones share all three.
#[derive(Debug, Clone)]
pub struct Router {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: RouterConfig,
    table: Arc<ArcSwap<RouteTable>>,
    endpoints: Arc<Endpoints>,
    activators: Arc<RevisionEndpoints>,
    metrics: RouterMetrics,
    registry: Registry,
    graphs: Arc<ArcSwap<graph::GraphTable>>,
    waker: proxy::graph::Waker,
}

impl Router {
    /// A router with no routes yet, sending to the replicas registered in `endpoints`, and to the
    /// activator of the configuration (or, without one, to those published in [`Router::activators`]).
    pub fn new(config: RouterConfig, endpoints: Arc<Endpoints>) -> Result<Router> {
        config.validate()?;
        let activators = RevisionEndpoints::new(RevisionKey::new("skiff-system", "skiff-activator"), 0);
        if let Some(activator) = config.activator {
            activators.set_addresses([activator]);
        }
        let table = Arc::new(ArcSwap::from_pointee(RouteTable::new(config.domain.clone(), Vec::new())));
        let metrics = RouterMetrics::default();
        let mut registry = Registry::with_prefix("skiff_router");
        metrics.register(&mut registry);
        let graphs = Arc::new(ArcSwap::from_pointee(graph::GraphTable::default()));
        let waker = proxy::graph::Waker::default();
        Ok(Router { inner: Arc::new(Inner { config, table, endpoints, activators, metrics, registry, graphs, waker }) })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &RouterConfig {
        &self.inner.config
    }

    /// Replaces every route: builds a new table and swaps it in atomically; requests in flight keep
    /// the table they started with.
    pub fn publish(&self, routes: Vec<ServiceRoute>) {
        let table = RouteTable::new(self.inner.config.domain.clone(), routes);
        tracing::debug!(services = table.len(), "router routes published");
        self.inner.table.store(Arc::new(table));
    }

    /// Replaces every InferenceGraph ([`graph`]); `propagate` are the patterns of the request
    /// headers passed on to each step (KServe's `PROPAGATE_HEADERS`).
    pub fn publish_graphs(&self, graphs: Vec<graph::GraphRoute>, propagate: &[String]) {
        let table = graph::GraphTable::new(&self.inner.config.domain, graphs, propagate);
        self.inner.graphs.store(Arc::new(table));
    }

    /// The autoscaler a graph pokes to wake its steps at zero, all at once (where the process runs one).
    pub fn set_poker(&self, poker: Arc<dyn skiff_dataplane::Poker>) {
        let _ = self.inner.waker.0.set(poker);
    }

    /// The activators requests for revisions without room go to (least loaded first); a
    /// discovery watch publishes their addresses with [`RevisionEndpoints::set_addresses`].
    pub fn activators(&self) -> &Arc<RevisionEndpoints> {
        &self.inner.activators
    }

    /// The endpoint registry it sends with.
    pub fn endpoints(&self) -> &Arc<Endpoints> {
        &self.inner.endpoints
    }

    /// The table requests are routed with now.
    pub fn routes(&self) -> Arc<RouteTable> {
        self.inner.table.load_full()
    }

    /// The metric families, to register in another registry as well.
    pub fn metrics(&self) -> &RouterMetrics {
        &self.inner.metrics
    }

    /// The metrics in OpenMetrics text format, for an admin `/metrics` endpoint.
    pub fn metrics_text(&self) -> String {
        let mut text = String::new();
        match prometheus_client::encoding::text::encode(&mut text, &self.inner.registry) {
            Ok(()) => text,
            Err(_) => String::new(),
        }
    }

    /// Starts the proxy on its own threads and returns once it accepts connections. It runs until the
    /// handle shuts it down or is dropped, or the process gets SIGTERM (graceful).
    pub fn start(&self) -> Result<RouterHandle> {
        let proxy = proxy::Proxy {
            table: self.inner.table.clone(),
            endpoints: self.inner.endpoints.clone(),
            activators: self.inner.activators.clone(),
            metrics: self.inner.metrics.clone(),
            pool: Default::default(),
            draining: Arc::new(AtomicBool::new(false)),
            peek_timeout: self.inner.config.downstream.header_timeout,
            peek_budget: proxy::PeekBudget::new(self.inner.config.downstream.peek_budget),
            stream_idle: self.inner.config.downstream.stream_idle_timeout,
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_secs()),
            graphs: self.inner.graphs.clone(),
            waker: self.inner.waker.clone(),
        };
        server::start(&self.inner.config, proxy)
    }
}
