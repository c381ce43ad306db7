//! The router's Prometheus metrics: requests by service, revision and status, their latency, how many
//! went straight to a replica or through the activator, and how many are in flight.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Where a proxied request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Straight to a ready replica with room.
    Direct,
    /// To the activator, which holds it until a replica has room.
    Activator,
}

impl Via {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Activator => "activator",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    service: String,
    revision: String,
    status: u16,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    service: String,
    revision: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    service: String,
    revision: String,
    via: &'static str,
}

fn latency_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The router's metric families; clones share the same counters.
#[derive(Debug, Clone)]
pub struct RouterMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RevisionLabels, Histogram, fn() -> Histogram>,
    upstreams: Family<UpstreamLabels, Counter>,
    in_flight: Family<RevisionLabels, Gauge>,
}

impl Default for RouterMetrics {
    fn default() -> Self {
        RouterMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            upstreams: Family::default(),
            in_flight: Family::default(),
        }
    }
}

impl RouterMetrics {
    /// Registers every family in `registry` (names get the registry's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register("requests", "Requests answered, by service, revision and status", self.requests.clone());
        registry.register(
            "request_duration_seconds",
            "Time from request header to the end of the response",
            self.duration.clone(),
        );
        registry.register(
            "upstream_requests",
            "Requests proxied, by where they went (direct to a replica or via the activator)",
            self.upstreams.clone(),
        );
        registry.register(
            "inflight_requests",
            "Requests being proxied now, by service and revision",
            self.in_flight.clone(),
        );
    }

    /// Counts a request in flight to `revision`; the caller decrements the returned gauge when it ends.
    pub(crate) fn started(&self, service: &str, revision: &str) -> Gauge {
        let labels = RevisionLabels { service: service.to_owned(), revision: revision.to_owned() };
        let gauge = self.in_flight.get_or_create_owned(&labels);
        gauge.inc();
        gauge
    }

    /// Counts one proxied request by destination.
    pub(crate) fn sent(&self, service: &str, revision: &str, via: Via) {
        let labels = UpstreamLabels { service: service.to_owned(), revision: revision.to_owned(), via: via.as_str() };
        self.upstreams.get_or_create(&labels).inc();
    }

    /// Counts one answered request and its latency.
    pub(crate) fn answered(&self, service: &str, revision: &str, status: u16, elapsed: Duration) {
        let labels = RevisionLabels { service: service.to_owned(), revision: revision.to_owned() };
        self.duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        let RevisionLabels { service, revision } = labels;
        self.requests.get_or_create(&RequestLabels { service, revision, status }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn in_flight_counts_until_the_gauge_is_given_back() {
        let metrics = RouterMetrics::default();
        let mut registry = Registry::with_prefix("skiff_router");
        metrics.register(&mut registry);
        let first = metrics.started("default/iris", "iris-predictor-00001");
        let _second = metrics.started("default/iris", "iris-predictor-00001");
        first.dec();
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"skiff_router_inflight_requests{service="default/iris",revision="iris-predictor-00001"} 1"#
            ),
            "{text}"
        );
    }
}
