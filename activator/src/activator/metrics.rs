//! The activator's Prometheus metrics: per revision, requests queued and forwarded (gauges),
//! requests answered by status, the time requests waited for a replica, and cold starts.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::cold_start::ColdStartHistograms;
use crate::load::LoadGauges;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RevisionLabels {
    revision: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    revision: String,
    status: u16,
}

/// The activator's metrics and the registry that exposes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    queued: Family<RevisionLabels, Gauge>,
    in_flight: Family<RevisionLabels, Gauge>,
    wait: Family<RevisionLabels, Histogram>,
    cold_start: Family<RevisionLabels, Histogram>,
    cold_start_ready: Family<RevisionLabels, Histogram>,
}

/// 1 ms to about 9 minutes: a warm slot to a slow cold start.
fn wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let queued = Family::<RevisionLabels, Gauge>::default();
        let in_flight = Family::<RevisionLabels, Gauge>::default();
        let wait = Family::<RevisionLabels, Histogram>::new_with_constructor(wait_histogram as fn() -> Histogram);
        registry.register("skiff_activator_requests", "Requests answered, by revision and status", requests.clone());
        registry.register(
            "skiff_activator_queued_requests",
            "Requests waiting for a slot on a ready replica",
            queued.clone(),
        );
        registry.register(
            "skiff_activator_inflight_requests",
            "Requests forwarded to a replica and not yet answered",
            in_flight.clone(),
        );
        registry.register("skiff_activator_wait_seconds", "Time from arrival to a slot on a replica", wait.clone());
        let cold_start = Family::<RevisionLabels, Histogram>::new_with_constructor(wait_histogram as fn() -> Histogram);
        let cold_start_ready =
            Family::<RevisionLabels, Histogram>::new_with_constructor(wait_histogram as fn() -> Histogram);
        registry.register(
            "skiff_activator_cold_start_seconds",
            "Cold starts: from the first request held while no replica was ready to the end of its answer",
            cold_start.clone(),
        );
        registry.register(
            "skiff_activator_cold_start_ready_seconds",
            "Cold starts: from the first held request (the scale-from-zero request) to its slot on the first ready replica",
            cold_start_ready.clone(),
        );
        Metrics { registry, requests, queued, in_flight, wait, cold_start, cold_start_ready }
    }
}

impl Metrics {
    /// The gauges that mirror `revision`'s counts.
    pub fn load_gauges(&self, revision: &str) -> LoadGauges {
        let labels = RevisionLabels { revision: revision.to_owned() };
        LoadGauges {
            pending: Gauge::default(),
            queued: self.queued.get_or_create(&labels).clone(),
            forwarded: self.in_flight.get_or_create(&labels).clone(),
        }
    }

    /// `revision`'s wait-time histogram.
    pub fn wait_seconds(&self, revision: &str) -> Histogram {
        self.wait.get_or_create(&RevisionLabels { revision: revision.to_owned() }).clone()
    }

    /// `revision`'s cold-start histograms.
    pub fn cold_starts(&self, revision: &str) -> ColdStartHistograms {
        let labels = RevisionLabels { revision: revision.to_owned() };
        ColdStartHistograms {
            to_response: self.cold_start.get_or_create(&labels).clone(),
            to_ready: self.cold_start_ready.get_or_create(&labels).clone(),
        }
    }

    /// Counts an answered request; `revision` is empty when the request named none that is known.
    pub fn answered(&self, revision: &str, status: u16) {
        self.requests.get_or_create(&RequestLabels { revision: revision.to_owned(), status }).inc();
    }

    /// Drops `revision`'s gauges and histograms (its request counts stay).
    pub fn forget(&self, revision: &str) {
        let labels = RevisionLabels { revision: revision.to_owned() };
        self.queued.remove(&labels);
        self.in_flight.remove(&labels);
        self.wait.remove(&labels);
        self.cold_start.remove(&labels);
        self.cold_start_ready.remove(&labels);
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
    fn exposes_every_family_per_revision() {
        let m = Metrics::default();
        let gauges = m.load_gauges("r");
        gauges.queued.inc();
        gauges.forwarded.set(2);
        m.wait_seconds("r").observe(0.5);
        m.answered("r", 200);
        m.cold_starts("r").to_response.observe(0.05);
        let text = m.encode();
        assert!(text.contains(r#"skiff_activator_queued_requests{revision="r"} 1"#), "{text}");
        assert!(text.contains(r#"skiff_activator_inflight_requests{revision="r"} 2"#), "{text}");
        assert!(text.contains(r#"skiff_activator_wait_seconds_count{revision="r"} 1"#), "{text}");
        assert!(text.contains(r#"skiff_activator_requests_total{revision="r",status="200"} 1"#), "{text}");
        assert!(text.contains(r#"skiff_activator_cold_start_seconds_count{revision="r"} 1"#), "{text}");
        assert!(text.contains(r#"skiff_activator_cold_start_ready_seconds_count{revision="r"} 0"#), "{text}");
        m.forget("r");
        assert!(!m.encode().contains(r#"skiff_activator_queued_requests{revision="r"}"#));
    }
}
