//! The queue-proxy's Prometheus metrics. `skiff_inflight_requests` and `skiff_queued_requests`
//! mean what they mean on skiff-server, so the autoscaler scrapes both the same way; so do the
//! request logger's `skiff_logger_events`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use skiff_http::logger::LoggerMetrics;

use crate::load::LoadGauges;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: u16,
}

/// The queue-proxy's metrics and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<StatusLabels, Counter>,
    load: LoadGauges,
    wait: Histogram,
    logger: LoggerMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<StatusLabels, Counter>::default();
        let load = LoadGauges::default();
        let wait = Histogram::new(exponential_buckets(0.000_1, 2.0, 22));
        registry.register("skiff_queue_proxy_requests", "Proxied requests answered, by status", requests.clone());
        registry.register(
            "skiff_inflight_requests",
            "Requests received and not yet answered, queued ones included",
            load.pending.clone(),
        );
        registry.register("skiff_queued_requests", "Requests waiting for a concurrency slot", load.queued.clone());
        registry.register(
            "skiff_upstream_inflight_requests",
            "Requests sent to the container and not yet answered",
            load.forwarded.clone(),
        );
        registry.register("skiff_queue_proxy_wait_seconds", "Time from arrival to a concurrency slot", wait.clone());
        let logger = LoggerMetrics::default();
        logger.register(&mut registry);
        Metrics { registry, requests, load, wait, logger }
    }
}

impl Metrics {
    /// The gauges the request counts are mirrored into.
    pub fn load_gauges(&self) -> LoadGauges {
        self.load.clone()
    }

    /// The wait-time histogram.
    pub fn wait_seconds(&self) -> &Histogram {
        &self.wait
    }

    /// The request logger's counters.
    pub fn logger(&self) -> &LoggerMetrics {
        &self.logger
    }

    /// Counts an answered request.
    pub fn answered(&self, status: u16) {
        self.requests.get_or_create(&StatusLabels { status }).inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_the_autoscaler_signal_under_skiff_server_names() {
        let m = Metrics::default();
        m.load_gauges().pending.set(3);
        m.load_gauges().queued.set(1);
        m.answered(503);
        assert_eq!(m.logger().count("dropped"), 0);
        let text = m.encode();
        assert!(text.contains("skiff_inflight_requests 3"), "{text}");
        assert!(text.contains("skiff_queued_requests 1"), "{text}");
        assert!(text.contains("skiff_upstream_inflight_requests 0"), "{text}");
        assert!(text.contains(r#"skiff_queue_proxy_requests_total{status="503"} 1"#), "{text}");
        assert!(text.contains(r#"skiff_logger_events_total{outcome="dropped"} 0"#), "{text}");
    }
}
