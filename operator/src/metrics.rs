//! The controller's Prometheus metrics (`/metrics` on the admin port): reconciles, failures by
//! kind, reconcile duration, objects applied and deleted, status writes, and leadership.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::error::Error;

/// Label of a failure: the error's kind.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// `kube`, `conflict`, `platform`, ...
    pub error: String,
}

/// Label of a write: the object's kind.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `Deployment`, `Service`.
    pub kind: String,
}

/// Every metric the controller exports.
#[derive(Debug)]
pub struct Metrics {
    /// Reconciles started.
    pub reconciles: Counter,
    /// Reconciles that failed, by error kind.
    pub failures: Family<ErrorLabels, Counter>,
    /// Reconcile duration in seconds.
    pub duration: Histogram,
    /// Server-side applies, by kind.
    pub applies: Family<KindLabels, Counter>,
    /// Revisions collected.
    pub deletes: Counter,
    /// Status writes.
    pub status_writes: Counter,
    /// Status writes refused because the copy read was stale (retried).
    pub status_conflicts: Counter,
    /// Reconciles skipped because the cached copy was older than our own last status write.
    pub stale_skips: Counter,
    /// 1 while this replica holds the leader lease.
    pub leader: Gauge,
}

impl Metrics {
    /// Creates the metrics and registers them in `registry` (give it the prefix `skiff_controller`).
    pub fn new(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            reconciles: Counter::default(),
            failures: Family::default(),
            duration: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            applies: Family::default(),
            deletes: Counter::default(),
            status_writes: Counter::default(),
            status_conflicts: Counter::default(),
            stale_skips: Counter::default(),
            leader: Gauge::default(),
        };
        registry.register("reconciles", "InferenceService reconciles", metrics.reconciles.clone());
        registry.register("reconcile_failures", "Reconciles that failed, by error kind", metrics.failures.clone());
        registry.register("reconcile_duration_seconds", "Reconcile duration", metrics.duration.clone());
        registry.register("applies", "Objects written by server-side apply, by kind", metrics.applies.clone());
        registry.register("revision_deletes", "Revisions collected", metrics.deletes.clone());
        registry.register("status_writes", "InferenceService status writes", metrics.status_writes.clone());
        registry.register(
            "status_conflicts",
            "Status writes refused because the copy read was stale (retried)",
            metrics.status_conflicts.clone(),
        );
        registry.register(
            "stale_skips",
            "Reconciles skipped because the cached copy was older than our own last status write",
            metrics.stale_skips.clone(),
        );
        registry.register("leader", "1 while this replica holds the leader lease", metrics.leader.clone());
        metrics
    }

    /// Counts a reconcile; the returned guard records its duration when dropped.
    pub fn reconcile(&self) -> ReconcileTimer<'_> {
        self.reconciles.inc();
        ReconcileTimer { histogram: &self.duration, start: Instant::now() }
    }

    /// Counts a failed reconcile.
    pub fn failure(&self, error: &Error) {
        self.failures.get_or_create(&ErrorLabels { error: error.kind().to_owned() }).inc();
    }

    /// Counts a server-side apply of `kind`.
    pub fn applied(&self, kind: &str) {
        self.applies.get_or_create(&KindLabels { kind: kind.to_owned() }).inc();
    }
}

/// Records a reconcile's duration when dropped.
pub struct ReconcileTimer<'a> {
    histogram: &'a Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn exposes_reconciles_failures_and_duration() {
        let mut registry = Registry::with_prefix("skiff_controller");
        let metrics = Metrics::new(&mut registry);
        drop(metrics.reconcile());
        metrics.failure(&Error::Spec("x".into()));
        metrics.applied("Deployment");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "skiff_controller_reconciles_total 1",
            "skiff_controller_reconcile_failures_total{error=\"spec\"} 1",
            "skiff_controller_reconcile_duration_seconds_count 1",
            "skiff_controller_applies_total{kind=\"Deployment\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
