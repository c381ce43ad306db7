//! Prometheus metrics: requests, latency, in-flight requests (the autoscaler's signal), queue depth
//! and batch sizes.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use skiff_http::logger::LoggerMetrics;

/// Labels of a served request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// Model name.
    pub model: String,
    /// `v1` or `v2`.
    pub protocol: &'static str,
    /// HTTP status code.
    pub status: u16,
}

/// Labels of a latency observation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LatencyLabels {
    /// Model name.
    pub model: String,
    /// `v1` or `v2`.
    pub protocol: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

/// The server's metrics and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    inflight: Gauge,
    queued: Gauge,
    batch_sizes: Family<ModelLabels, Histogram>,
    /// The request logger's counters.
    pub logger: LoggerMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        let batch_sizes = Family::<ModelLabels, Histogram>::new_with_constructor(batch_histogram as fn() -> Histogram);
        let inflight = Gauge::default();
        let queued = Gauge::default();
        registry.register(
            "skiff_requests",
            "Inference requests answered, by model, protocol and status",
            requests.clone(),
        );
        registry.register(
            "skiff_request_duration_seconds",
            "Inference request latency from the first byte read to the response",
            latency.clone(),
        );
        registry.register(
            "skiff_inflight_requests",
            "Inference requests received and not yet answered, queued ones included",
            inflight.clone(),
        );
        registry.register("skiff_queued_requests", "Inference requests waiting for a concurrency slot", queued.clone());
        registry.register("skiff_batch_size", "Requests run together in one inference call", batch_sizes.clone());
        let logger = LoggerMetrics::default();
        logger.register(&mut registry);
        Metrics { registry, requests, latency, inflight, queued, batch_sizes, logger }
    }
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
}

fn batch_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 10))
}

impl Metrics {
    /// Counts an answered inference request and its latency.
    pub fn observe(&self, model: &str, protocol: &'static str, status: u16, elapsed: Duration) {
        self.requests.get_or_create(&RequestLabels { model: model.to_owned(), protocol, status }).inc();
        self.latency.get_or_create(&LatencyLabels { model: model.to_owned(), protocol }).observe(elapsed.as_secs_f64());
    }

    /// Marks a request in flight until the guard drops.
    pub fn in_flight(&self) -> GaugeGuard {
        GaugeGuard::new(self.inflight.clone())
    }

    /// The queue-depth gauge, for the admission gate.
    pub fn queued(&self) -> Gauge {
        self.queued.clone()
    }

    /// The batch-size histogram of one model.
    pub fn batch_sizes(&self, model: &str) -> Histogram {
        self.batch_sizes.get_or_create(&ModelLabels { model: model.to_owned() }).clone()
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// Holds a gauge one higher until dropped.
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    /// Increments `gauge` now and decrements it on drop.
    pub fn new(gauge: Gauge) -> GaugeGuard {
        gauge.inc();
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_every_family() {
        let m = Metrics::default();
        m.observe("iris", "v2", 200, Duration::from_micros(300));
        let _flight = m.in_flight();
        m.batch_sizes("iris").observe(4.0);
        let text = m.encode();
        assert!(text.contains(r#"skiff_requests_total{model="iris",protocol="v2",status="200"} 1"#), "{text}");
        assert!(text.contains(r#"skiff_request_duration_seconds_count{model="iris",protocol="v2"} 1"#), "{text}");
        assert!(text.contains("skiff_inflight_requests 1"), "{text}");
        assert!(text.contains("skiff_queued_requests 0"), "{text}");
        assert!(text.contains(r#"skiff_batch_size_sum{model="iris"} 4.0"#), "{text}");
        drop(_flight);
        assert!(m.encode().contains("skiff_inflight_requests 0"));
    }
}
