//! The autoscaler's signal in standalone mode. Concurrency: requests the activator holds for a
//! revision plus the in-flight gauge (`skiff_inflight_requests`) scraped from each of its ready
//! replicas. Requests per second: the router's count of requests routed to the revision, as a
//! rate over the time since the previous sample.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use skiff_activator::Activator;
use skiff_api::endpoints::Endpoints;
use skiff_autoscaler::Metric;
use skiff_autoscaler::runner::MetricSource;

/// Scrapes replicas, reads the activator and the router's arrival counts.
pub struct Signal {
    activator: Arc<Activator>,
    endpoints: Arc<Endpoints>,
    client: Client<HttpConnector, Empty<Bytes>>,
    /// Per revision, the arrival count and time of the previous rps sample.
    last_arrivals: Mutex<HashMap<String, (u64, Instant)>>,
}

impl Signal {
    /// A source over these registries.
    pub fn new(activator: Arc<Activator>, endpoints: Arc<Endpoints>) -> Signal {
        Signal {
            activator,
            endpoints,
            client: Client::builder(TokioExecutor::new()).build_http(),
            last_arrivals: Mutex::new(HashMap::new()),
        }
    }

    async fn scrape(&self, addr: std::net::SocketAddr) -> f64 {
        let uri = format!("http://{addr}/metrics");
        let fetch = async {
            let response = self.client.get(uri.parse().ok()?).await.ok()?;
            let body = response.into_body().collect().await.ok()?.to_bytes();
            in_flight(std::str::from_utf8(&body).ok()?)
        };
        tokio::time::timeout(Duration::from_millis(500), fetch).await.ok().flatten().unwrap_or(0.0)
    }

    fn requests_per_second(&self, revision: &str) -> f64 {
        let arrivals = self.endpoints.get(revision).map_or(0, |e| e.arrivals());
        let now = Instant::now();
        let mut last = self.last_arrivals.lock().expect("signal lock");
        let previous = last.insert(revision.to_owned(), (arrivals, now));
        previous.map_or(0.0, |(count, at)| rate(count, arrivals, now.duration_since(at)))
    }
}

impl MetricSource for Signal {
    fn observe(&self, revision: &str, metric: Metric) -> impl Future<Output = f64> + Send {
        let (rps, held, replicas) = match metric {
            Metric::Rps => (Some(self.requests_per_second(revision)), 0.0, Default::default()),
            Metric::Concurrency => (
                None,
                self.activator.stats(revision).queued as f64,
                self.endpoints.get(revision).map(|e| e.ready()).unwrap_or_default(),
            ),
        };
        async move {
            if let Some(rps) = rps {
                return rps;
            }
            let mut total = held;
            for replica in replicas.iter() {
                total += self.scrape(replica.addr).await;
            }
            total
        }
    }
}

/// Requests per second between two readings of a counter (0 when no time passed; a counter that
/// went back, as a re-created revision's does, counts from 0).
fn rate(before: u64, now: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let delta = if now >= before { now - before } else { now };
    delta as f64 / secs
}

/// The value of `skiff_inflight_requests` in an OpenMetrics text.
fn in_flight(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix("skiff_inflight_requests ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use skiff_activator::Poker;
    use skiff_api::endpoints::RevisionEndpoints;

    use super::*;

    struct NoPokes;
    impl Poker for NoPokes {
        fn poke(&self, _: &str) {}
    }

    #[test]
    fn reads_the_gauge() {
        let text =
            "# HELP skiff_inflight_requests x\n# TYPE skiff_inflight_requests gauge\nskiff_inflight_requests 7\n";
        assert_eq!(in_flight(text), Some(7.0));
        assert_eq!(in_flight("skiff_queued_requests 1\n"), None);
    }

    #[test]
    fn rate_is_the_count_over_the_time() {
        assert_eq!(rate(10, 40, Duration::from_secs(2)), 15.0);
        assert_eq!(rate(10, 10, Duration::from_secs(1)), 0.0);
        assert_eq!(rate(10, 4, Duration::from_millis(500)), 8.0, "a reset counter counts from 0");
        assert_eq!(rate(0, 5, Duration::ZERO), 0.0);
    }

    #[tokio::test]
    async fn rps_comes_from_the_arrivals_the_router_counts() {
        let endpoints = Arc::new(Endpoints::default());
        let revision = RevisionEndpoints::new("r", 0);
        endpoints.insert(revision.clone());
        let activator = Activator::new(endpoints.clone(), Arc::new(NoPokes));
        let signal = Signal::new(activator, endpoints);
        assert_eq!(signal.observe("r", Metric::Rps).await, 0.0, "the first sample sets the baseline");
        for _ in 0..30 {
            revision.arrived();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let rps = signal.observe("r", Metric::Rps).await;
        assert!(rps > 0.0 && rps <= 30.0 / 0.2, "30 requests in at least 0.2 s: {rps}");
        assert_eq!(signal.observe("r", Metric::Concurrency).await, 0.0, "nothing held, no replica");
    }
}
