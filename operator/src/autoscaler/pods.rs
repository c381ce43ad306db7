//! The autoscaler's metric on Kubernetes: the revision's ready pods (from its EndpointSlices) are
//! scraped at their IPs, `skiff-server`'s or the queue-proxy's `/metrics`: the in-flight gauge for
//! concurrency, the request counters for requests per second.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use skiff_autoscaler::Metric;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::scrape::Scraper;
use skiff_dataplane::{MetricSource, RevisionKey};

/// Scrapes each revision's ready pods.
pub struct PodMetrics {
    endpoints: Arc<Endpoints>,
    scraper: Scraper,
}

impl PodMetrics {
    /// Pods as `endpoints` lists them.
    pub fn new(endpoints: Arc<Endpoints>) -> PodMetrics {
        PodMetrics { endpoints, scraper: Scraper::default() }
    }
}

impl MetricSource for PodMetrics {
    fn observe(&self, revision: &RevisionKey, metric: Metric) -> impl Future<Output = Option<f64>> + Send {
        let pods: Vec<SocketAddr> =
            self.endpoints.get(revision).map(|e| e.ready().iter().map(|r| r.addr).collect()).unwrap_or_default();
        async move {
            match metric {
                Metric::Concurrency => self.scraper.in_flight(&pods).await,
                Metric::Rps => Some(self.scraper.requests_per_second(&pods).await),
            }
        }
    }
}
