//! The autoscaler's signal in standalone mode. Concurrency: the in-flight gauge scraped from each
//! of the revision's ready replicas (the requests the activator holds are reported to the runner
//! apart). Requests per second: the router's count of requests routed to the revision, as a rate
//! over the time since the previous sample.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use skiff_autoscaler::Metric;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::scrape::{Scraper, rate};
use skiff_dataplane::{MetricSource, RevisionKey};

/// Scrapes replicas and reads the router's arrival counts.
pub struct Signal {
    endpoints: Arc<Endpoints>,
    scraper: Scraper,
    /// Per revision, the arrival count and time of the previous rps sample.
    last_arrivals: Mutex<HashMap<RevisionKey, (u64, Instant)>>,
}

impl Signal {
    /// A source over this registry.
    pub fn new(endpoints: Arc<Endpoints>) -> Signal {
        Signal { endpoints, scraper: Scraper::default(), last_arrivals: Mutex::new(HashMap::new()) }
    }

    fn requests_per_second(&self, revision: &RevisionKey) -> f64 {
        let arrivals = self.endpoints.get(revision).map_or(0, |e| e.arrivals());
        let now = Instant::now();
        let mut last = self.last_arrivals.lock().expect("signal lock");
        let previous = last.insert(revision.clone(), (arrivals, now));
        previous.map_or(0.0, |(count, at)| rate(count as f64, arrivals as f64, now.duration_since(at)))
    }
}

impl MetricSource for Signal {
    fn observe(&self, revision: &RevisionKey, metric: Metric) -> impl Future<Output = Option<f64>> + Send {
        let (rps, replicas): (Option<f64>, Vec<SocketAddr>) = match metric {
            Metric::Rps => (Some(self.requests_per_second(revision)), Vec::new()),
            Metric::Concurrency => (
                None,
                self.endpoints.get(revision).map(|e| e.ready().iter().map(|r| r.addr).collect()).unwrap_or_default(),
            ),
        };
        async move {
            match rps {
                Some(rps) => Some(rps),
                None => self.scraper.in_flight(&replicas).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use skiff_dataplane::endpoints::RevisionEndpoints;

    use super::*;

    #[tokio::test]
    async fn rps_comes_from_the_arrivals_the_router_counts() {
        let endpoints = Arc::new(Endpoints::default());
        let key = RevisionKey::new("default", "r");
        let revision = RevisionEndpoints::new(key.clone(), 0);
        endpoints.insert(revision.clone());
        let signal = Signal::new(endpoints);
        assert_eq!(signal.observe(&key, Metric::Rps).await, Some(0.0), "the first sample sets the baseline");
        for _ in 0..30 {
            revision.arrived();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let rps = signal.observe(&key, Metric::Rps).await.unwrap();
        assert!(rps > 0.0 && rps <= 30.0 / 0.2, "30 requests in at least 0.2 s: {rps}");
        assert_eq!(signal.observe(&key, Metric::Concurrency).await, None, "no replica, no reading");
    }
}
