//! The router's Prometheus metrics: requests by service, revision and status, their latency, how many
//! went straight to a replica or through the activator, how many are in flight, and cold starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use skiff_dataplane::cold_start::{ColdStart, FirstHeld};

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

/// The first request of a cold start as the router sent it, until it is logged.
pub(crate) struct ColdStartRequest {
    tracker: Arc<ColdStart>,
    first: FirstHeld,
}

/// The router's metric families; clones share the same counters.
#[derive(Debug, Clone)]
pub struct RouterMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<RevisionLabels, Histogram, fn() -> Histogram>,
    upstreams: Family<UpstreamLabels, Counter>,
    in_flight: Family<RevisionLabels, Gauge>,
    cold_start: Family<RevisionLabels, Histogram, fn() -> Histogram>,
    /// Each revision's cold starts (touched only by requests sent while it has no ready replica).
    cold_starts: Arc<Mutex<HashMap<RevisionLabels, Arc<ColdStart>>>>,
}

impl Default for RouterMetrics {
    fn default() -> Self {
        RouterMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            upstreams: Family::default(),
            in_flight: Family::default(),
            cold_start: Family::new_with_constructor(latency_histogram),
            cold_starts: Arc::default(),
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
        registry.register(
            "cold_start_seconds",
            "Cold starts: from the first request sent while the revision had no ready replica to the end of its answer",
            self.cold_start.clone(),
        );
    }

    /// A request for `revision` is sent to the activator while the revision has no ready replica:
    /// the cold start's first request when none was in progress.
    pub(crate) fn at_zero(&self, service: &str, revision: &str) -> Option<ColdStartRequest> {
        let labels = RevisionLabels { service: service.to_owned(), revision: revision.to_owned() };
        let tracker =
            self.cold_starts.lock().unwrap_or_else(PoisonError::into_inner).entry(labels).or_default().clone();
        let first = tracker.arrived_at_zero()?;
        Some(ColdStartRequest { tracker, first })
    }

    /// The cold start's first request ended: answered (counted) or failed (abandoned).
    pub(crate) fn cold_start_ended(&self, service: &str, revision: &str, request: ColdStartRequest, answered: bool) {
        let ColdStartRequest { tracker, first } = request;
        if answered {
            let labels = RevisionLabels { service: service.to_owned(), revision: revision.to_owned() };
            self.cold_start.get_or_create(&labels).observe(tracker.answered(first).as_secs_f64());
        } else {
            tracker.abandoned(first);
        }
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

    #[test]
    fn a_cold_start_is_counted_once_when_its_first_request_is_answered() {
        let metrics = RouterMetrics::default();
        let mut registry = Registry::with_prefix("skiff_router");
        metrics.register(&mut registry);
        let (service, revision) = ("default/iris", "iris-predictor-00001");
        let first = metrics.at_zero(service, revision).expect("the first request at zero");
        assert!(metrics.at_zero(service, revision).is_none(), "the second joins the same cold start");
        metrics.cold_start_ended(service, revision, first, true);
        let failed = metrics.at_zero(service, revision).expect("a new cold start");
        metrics.cold_start_ended(service, revision, failed, false);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                r#"skiff_router_cold_start_seconds_count{service="default/iris",revision="iris-predictor-00001"} 1"#
            ),
            "{text}"
        );
    }
}
