//! Reading replicas' own metrics, the autoscaler's view of the pods: the in-flight gauge
//! (`skiff_inflight_requests`, which `skiff-server` and the queue-proxy both expose) for
//! concurrency, and their request counters for requests per second. Used by `skiff up` and by the
//! autoscaler in the controller alike; the text parsing is pure.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// How long one scrape may take before the replica counts as 0.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(500);
/// The counters of requests a replica answered: `skiff-server`'s and the queue-proxy's.
const REQUEST_COUNTERS: [&str; 2] = ["skiff_requests_total", "skiff_queue_proxy_requests_total"];

/// Scrapes `/metrics` of replicas; remembers each replica's request count for rates.
pub struct Scraper {
    client: Client<HttpConnector, Empty<Bytes>>,
    counts: Mutex<HashMap<SocketAddr, (f64, Instant)>>,
}

impl Default for Scraper {
    fn default() -> Self {
        Scraper { client: Client::builder(TokioExecutor::new()).build_http(), counts: Mutex::new(HashMap::new()) }
    }
}

impl Scraper {
    /// The summed in-flight gauge of `replicas`. Replicas that do not answer (in time) count as
    /// the average of those that do, as Knative's scraper extrapolates; `None` when none answers, so
    /// that an overloaded moment never reads as idle, and when there is no replica, as Knative's
    /// scraper records nothing for a revision without ready pods (its windows then hold only what
    /// the activators report, so a burst at zero is not averaged with zeros).
    pub async fn in_flight(&self, replicas: &[SocketAddr]) -> Option<f64> {
        let texts = futures::future::join_all(replicas.iter().map(|addr| self.fetch(*addr))).await;
        let read: Vec<f64> = texts.iter().flatten().filter_map(|text| in_flight(text)).collect();
        extrapolate(&read, replicas.len())
    }

    /// Requests per second `replicas` answered since the previous call (a replica seen for the
    /// first time sets its baseline; a counter that went back counts from 0).
    pub async fn requests_per_second(&self, replicas: &[SocketAddr]) -> f64 {
        let texts = futures::future::join_all(replicas.iter().map(|addr| self.fetch(*addr))).await;
        let now = Instant::now();
        let mut counts = self.counts.lock().expect("scraper lock");
        let mut total = 0.0;
        for (addr, text) in replicas.iter().zip(texts) {
            let Some(count) = text.as_deref().map(requests) else { continue };
            if let Some((before, at)) = counts.insert(*addr, (count, now)) {
                total += rate(before, count, now.duration_since(at));
            }
        }
        total
    }

    /// Forgets replicas other than `live` (their baselines).
    pub fn retain(&self, live: &[SocketAddr]) {
        self.counts.lock().expect("scraper lock").retain(|addr, _| live.contains(addr));
    }

    async fn fetch(&self, addr: SocketAddr) -> Option<String> {
        let fetch = async {
            let response = self.client.get(format!("http://{addr}/metrics").parse().ok()?).await.ok()?;
            let body = response.into_body().collect().await.ok()?.to_bytes();
            String::from_utf8(body.to_vec()).ok()
        };
        tokio::time::timeout(SCRAPE_TIMEOUT, fetch).await.ok().flatten()
    }
}

/// The total over `total` replicas from the readings of those that answered; `None` without
/// replicas or readings.
pub fn extrapolate(read: &[f64], total: usize) -> Option<f64> {
    if total == 0 || read.is_empty() {
        return None;
    }
    Some(read.iter().sum::<f64>() / read.len() as f64 * total as f64)
}

/// The value of `skiff_inflight_requests` in an OpenMetrics text.
pub fn in_flight(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix("skiff_inflight_requests ")?.trim().parse().ok())
}

/// The sum of the request counters in an OpenMetrics text (every label set).
pub fn requests(text: &str) -> f64 {
    text.lines()
        .filter(|l| REQUEST_COUNTERS.iter().any(|name| l.strip_prefix(name).is_some_and(|r| r.starts_with(['{', ' ']))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Events per second between two readings of a counter (0 when no time passed; a counter that
/// went back, as a restarted replica's does, counts from 0).
pub fn rate(before: f64, now: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    let delta = if now >= before { now - before } else { now };
    delta / secs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_gauge_and_the_counters() {
        let text = "# HELP skiff_inflight_requests x\n# TYPE skiff_inflight_requests gauge\nskiff_inflight_requests 7\n\
                    skiff_requests_total{model=\"m\",protocol=\"v2\",status=\"200\"} 10\n\
                    skiff_requests_total{model=\"m\",protocol=\"v1\",status=\"400\"} 2\n\
                    skiff_requests_total_other 100\n# EOF\n";
        assert_eq!(in_flight(text), Some(7.0));
        assert_eq!(in_flight("skiff_queued_requests 1\n"), None);
        assert_eq!(requests(text), 12.0);
        assert_eq!(requests("skiff_queue_proxy_requests_total{status=\"200\"} 5\n"), 5.0);
    }

    #[test]
    fn replicas_that_do_not_answer_count_as_the_average_of_the_others() {
        assert_eq!(extrapolate(&[4.0, 2.0], 4), Some(12.0));
        assert_eq!(extrapolate(&[], 3), None, "no reading is not a reading of 0");
        assert_eq!(extrapolate(&[], 0), None, "no replica: no reading, as Knative records none at zero pods");
    }

    #[test]
    fn rate_is_the_count_over_the_time() {
        assert_eq!(rate(10.0, 40.0, Duration::from_secs(2)), 15.0);
        assert_eq!(rate(10.0, 10.0, Duration::from_secs(1)), 0.0);
        assert_eq!(rate(10.0, 4.0, Duration::from_millis(500)), 8.0, "a reset counter counts from 0");
        assert_eq!(rate(0.0, 5.0, Duration::ZERO), 0.0);
    }
}
