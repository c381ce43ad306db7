//! The container-concurrency gate: at most N inference requests run at once, up to a bounded
//! number wait, and the rest are refused with 503 at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, Result};
use crate::metrics::GaugeGuard;

/// Admits inference requests; clone-free and shared by all connections.
pub struct Admission {
    slots: Option<Arc<Semaphore>>,
    concurrency: usize,
    max_queued: usize,
    queued: AtomicUsize,
    queued_gauge: Gauge,
}

/// Proof of admission; the slot frees when it drops. `None` inside when concurrency is unlimited.
pub struct Permit {
    _slot: Option<OwnedSemaphorePermit>,
}

impl Admission {
    /// `concurrency` 0 means unlimited; otherwise up to `max_queued` requests wait for a slot.
    pub fn new(concurrency: usize, max_queued: usize, queued_gauge: Gauge) -> Admission {
        Admission {
            slots: (concurrency > 0).then(|| Arc::new(Semaphore::new(concurrency))),
            concurrency,
            max_queued,
            queued: AtomicUsize::new(0),
            queued_gauge,
        }
    }

    /// Waits for a slot, or fails at once with [`Error::Overloaded`] when the queue is full.
    pub async fn admit(&self) -> Result<Permit> {
        let Some(slots) = &self.slots else {
            return Ok(Permit { _slot: None });
        };
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Ok(Permit { _slot: Some(permit) });
        }
        let _place = QueuePlace::take(self)?;
        let permit = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
        Ok(Permit { _slot: Some(permit) })
    }
}

/// A place in the wait queue, given back on drop (also when the waiting request is cancelled).
struct QueuePlace<'a> {
    admission: &'a Admission,
    _gauge: GaugeGuard,
}

impl<'a> QueuePlace<'a> {
    fn take(admission: &'a Admission) -> Result<QueuePlace<'a>> {
        let ahead = admission.queued.fetch_add(1, Ordering::AcqRel);
        let place = QueuePlace { admission, _gauge: GaugeGuard::new(admission.queued_gauge.clone()) };
        if ahead >= admission.max_queued {
            return Err(Error::Overloaded(format!(
                "all {} concurrency slots are busy and {} requests are already queued",
                admission.concurrency, admission.max_queued
            )));
        }
        Ok(place)
    }
}

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.admission.queued.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use skiff_http::HttpError;

    use super::*;

    #[tokio::test]
    async fn unlimited_admits_everyone() {
        let a = Admission::new(0, 0, Gauge::default());
        let _p: Vec<_> = futures_permits(&a, 100).await;
    }

    async fn futures_permits(a: &Admission, n: usize) -> Vec<Permit> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(a.admit().await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn queues_up_to_the_limit_then_refuses() {
        let gauge = Gauge::default();
        let a = Arc::new(Admission::new(1, 1, gauge.clone()));
        let running = a.admit().await.unwrap();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.admit().await.map(|_| ()) }
        });
        while gauge.get() == 0 {
            tokio::task::yield_now().await;
        }
        let refused = a.admit().await.err().unwrap();
        assert_eq!(
            refused.to_string(),
            "server overloaded: all 1 concurrency slots are busy and 1 requests are already queued"
        );
        assert_eq!(refused.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        drop(running);
        waiter.await.unwrap().unwrap();
        assert_eq!(gauge.get(), 0);
        assert_eq!(a.queued.load(Ordering::Acquire), 0);
    }
}
