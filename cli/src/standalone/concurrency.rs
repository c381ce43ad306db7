//! The autoscaler's signal in standalone mode: requests the activator holds for a revision plus
//! the in-flight gauge (`skiff_inflight_requests`) scraped from each of its ready replicas.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use skiff_activator::Activator;
use skiff_api::endpoints::Endpoints;
use skiff_autoscaler::runner::ConcurrencySource;

/// Scrapes replicas and reads the activator.
pub struct Concurrency {
    activator: Arc<Activator>,
    endpoints: Arc<Endpoints>,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl Concurrency {
    /// A source over these registries.
    pub fn new(activator: Arc<Activator>, endpoints: Arc<Endpoints>) -> Concurrency {
        Concurrency { activator, endpoints, client: Client::builder(TokioExecutor::new()).build_http() }
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
}

impl ConcurrencySource for Concurrency {
    fn observe(&self, revision: &str) -> impl Future<Output = f64> + Send {
        let held = self.activator.stats(revision).queued as f64;
        let replicas = self.endpoints.get(revision).map(|e| e.ready()).unwrap_or_default();
        async move {
            let mut total = held;
            for replica in replicas.iter() {
                total += self.scrape(replica.addr).await;
            }
            total
        }
    }
}

/// The value of `skiff_inflight_requests` in an OpenMetrics text.
fn in_flight(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix("skiff_inflight_requests ")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_gauge() {
        let text =
            "# HELP skiff_inflight_requests x\n# TYPE skiff_inflight_requests gauge\nskiff_inflight_requests 7\n";
        assert_eq!(super::in_flight(text), Some(7.0));
        assert_eq!(super::in_flight("skiff_queued_requests 1\n"), None);
    }
}
