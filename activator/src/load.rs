//! Counting the requests held for one target (a revision, or the queue-proxy's upstream): pending
//! (admitted and not yet answered), queued (waiting for a slot) and forwarded (sent to a replica
//! and not yet answered), each bounded where asked and mirrored into Prometheus gauges. Every
//! count is a guard given back on drop, so a cancelled request never leaks one. It also tracks the
//! target's cold starts ([`ColdStart`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use skiff_dataplane::cold_start::ColdStart;

/// The gauges that mirror a [`Load`]'s counts; unregistered gauges are fine for counts nobody exports.
#[derive(Debug, Clone, Default)]
pub struct LoadGauges {
    /// Admitted and not yet answered.
    pub pending: Gauge,
    /// Waiting for a slot.
    pub queued: Gauge,
    /// Sent to a replica and not yet answered.
    pub forwarded: Gauge,
}

/// The live counts of one target.
#[derive(Debug, Default)]
pub struct Load {
    pending: AtomicUsize,
    queued: AtomicUsize,
    forwarded: AtomicUsize,
    gauges: LoadGauges,
    cold_start: ColdStart,
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Pending,
    Queued,
    Forwarded,
}

/// One request counted in one of a [`Load`]'s counts until dropped.
#[derive(Debug)]
#[must_use = "the count is given back when this drops"]
pub struct Counted {
    load: Arc<Load>,
    kind: Kind,
}

impl Load {
    /// Counts starting at zero, mirrored into `gauges`.
    pub fn new(gauges: LoadGauges) -> Arc<Load> {
        Arc::new(Load { gauges, ..Load::default() })
    }

    /// Admits a request unless `max` are already pending.
    pub fn admit(self: &Arc<Self>, max: Option<usize>) -> Option<Counted> {
        self.count(Kind::Pending, max)
    }

    /// Queues a request for a slot unless `max` are already queued.
    pub fn enqueue(self: &Arc<Self>, max: Option<usize>) -> Option<Counted> {
        self.count(Kind::Queued, max)
    }

    /// Counts a request sent to a replica.
    pub fn forwarding(self: &Arc<Self>) -> Counted {
        self.count(Kind::Forwarded, None).expect("an unbounded count always admits")
    }

    /// The target's cold starts.
    pub fn cold_start(&self) -> &ColdStart {
        &self.cold_start
    }

    /// Requests admitted and not yet answered.
    pub fn pending(&self) -> usize {
        self.counter(Kind::Pending).load(Ordering::Acquire)
    }

    /// Requests waiting for a slot.
    pub fn queued(&self) -> usize {
        self.counter(Kind::Queued).load(Ordering::Acquire)
    }

    /// Requests sent to a replica and not yet answered.
    pub fn forwarded(&self) -> usize {
        self.counter(Kind::Forwarded).load(Ordering::Acquire)
    }

    fn count(self: &Arc<Self>, kind: Kind, max: Option<usize>) -> Option<Counted> {
        let limit = max.unwrap_or(usize::MAX);
        self.counter(kind).fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1)).ok()?;
        self.gauge(kind).inc();
        Some(Counted { load: self.clone(), kind })
    }

    fn counter(&self, kind: Kind) -> &AtomicUsize {
        match kind {
            Kind::Pending => &self.pending,
            Kind::Queued => &self.queued,
            Kind::Forwarded => &self.forwarded,
        }
    }

    fn gauge(&self, kind: Kind) -> &Gauge {
        match kind {
            Kind::Pending => &self.gauges.pending,
            Kind::Queued => &self.gauges.queued,
            Kind::Forwarded => &self.gauges.forwarded,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.load.counter(self.kind).fetch_sub(1, Ordering::AcqRel);
        self.load.gauge(self.kind).dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_bounded_and_given_back_on_drop() {
        let gauges = LoadGauges::default();
        let load = Load::new(gauges.clone());
        let a = load.admit(Some(2)).unwrap();
        let b = load.admit(Some(2)).unwrap();
        assert!(load.admit(Some(2)).is_none(), "two pending at most");
        assert_eq!((load.pending(), gauges.pending.get()), (2, 2));
        drop(a);
        assert_eq!((load.pending(), gauges.pending.get()), (1, 1));
        assert!(load.admit(Some(2)).is_some());
        drop(b);
    }

    #[test]
    fn queued_and_forwarded_are_counted_apart() {
        let gauges = LoadGauges::default();
        let load = Load::new(gauges.clone());
        assert!(load.enqueue(Some(0)).is_none(), "a zero-length queue refuses");
        let waiting = load.enqueue(None).unwrap();
        let sent = load.forwarding();
        assert_eq!((load.queued(), load.forwarded(), load.pending()), (1, 1, 0));
        assert_eq!((gauges.queued.get(), gauges.forwarded.get()), (1, 1));
        drop((waiting, sent));
        assert_eq!((load.queued(), load.forwarded()), (0, 0));
        assert_eq!((gauges.queued.get(), gauges.forwarded.get()), (0, 0));
    }
}
