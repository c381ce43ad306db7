//! The runner: the I/O shell around the deciders. Every second it samples each revision's
//! metric (concurrency or requests per second) from a [`MetricSource`] and records it; every tick it asks each decider for a
//! decision and hands the desired count to a [`ReplicaBackend`]. A poke (a request waiting at
//! zero replicas) gets a decision at once instead of at the next tick.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use crate::{Decider, Decision, Metric, ScalingSpec};

/// Where replicas come from: Deployments' scale in Kubernetes, child processes in standalone mode.
pub trait ReplicaBackend: Send + Sync + 'static {
    /// Asks for `replicas` replicas of `revision`; returns at once, the backend converges in the background.
    fn scale(&self, revision: &str, replicas: u32);
    /// Replicas of `revision` that are ready now.
    fn ready_replicas(&self, revision: &str) -> u32;
}

/// Where the scaling metric comes from: for concurrency, requests held by the activator plus
/// requests in flight at replicas; for rps, requests arriving for the revision per second.
pub trait MetricSource: Send + Sync + 'static {
    /// `revision`'s value of `metric` now (rps: over the time since the previous observation).
    fn observe(&self, revision: &str, metric: Metric) -> impl Future<Output = f64> + Send;
}

struct Tracked {
    decider: Decider,
    last: Option<Decision>,
}

/// Drives one decider per revision.
pub struct Runner<B, S> {
    backend: Arc<B>,
    source: Arc<S>,
    tick: Duration,
    revisions: Mutex<HashMap<String, Tracked>>,
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

impl<B: ReplicaBackend, S: MetricSource> Runner<B, S> {
    /// A runner that decides every `tick`.
    pub fn new(backend: Arc<B>, source: Arc<S>, tick: Duration) -> Arc<Self> {
        Arc::new(Runner { backend, source, tick, revisions: Mutex::new(HashMap::new()) })
    }

    /// Starts autoscaling `revision`; it is scaled to its initial scale at once.
    pub fn add(&self, revision: &str, spec: ScalingSpec) {
        let mut decider = Decider::new(spec, now());
        let decision = decider.decide(now(), self.backend.ready_replicas(revision));
        self.backend.scale(revision, decision.desired_pods);
        self.lock().insert(revision.to_owned(), Tracked { decider, last: Some(decision) });
    }

    /// Stops autoscaling `revision` (the caller removes its replicas).
    pub fn remove(&self, revision: &str) {
        self.lock().remove(revision);
    }

    /// `held` requests are waiting for `revision`: when it has no ready replica, decide now, and
    /// size the first step for the requests already held (as Knative's activator reports them).
    pub fn poke(&self, revision: &str, held: f64) {
        let ready = self.backend.ready_replicas(revision);
        if ready > 0 {
            return;
        }
        let desired = {
            let mut revisions = self.lock();
            let Some(tracked) = revisions.get_mut(revision) else { return };
            let mut decision = tracked.decider.poke(now(), ready);
            let spec = tracked.decider.spec();
            let for_held = (held / spec.per_pod_target()).ceil() as u32;
            let cap = if spec.max_scale > 0 { spec.max_scale } else { u32::MAX };
            decision.desired_pods = decision.desired_pods.max(for_held.min(cap));
            let desired = decision.desired_pods;
            tracked.last = Some(decision);
            desired
        };
        self.backend.scale(revision, desired);
    }

    /// The latest decision for `revision`.
    pub fn decision(&self, revision: &str) -> Option<Decision> {
        self.lock().get(revision).and_then(|t| t.last.clone())
    }

    /// Samples every second and decides every tick, until the task is dropped.
    pub async fn run(self: Arc<Self>) {
        let sample = self.tick.min(Duration::from_secs(1));
        let samples_per_tick = (self.tick.as_millis() / sample.as_millis().max(1)).max(1) as u64;
        let mut interval = tokio::time::interval(sample);
        interval.set_missed_tick_behavior(MissedTickBehavior::Skip);
        for count in 1u64.. {
            interval.tick().await;
            self.sample().await;
            if count % samples_per_tick == 0 {
                self.decide_all();
            }
        }
    }

    async fn sample(&self) {
        let revisions: Vec<(String, Metric)> =
            self.lock().iter().map(|(name, tracked)| (name.clone(), tracked.decider.spec().metric)).collect();
        for (name, metric) in revisions {
            let value = self.source.observe(&name, metric).await;
            if let Some(tracked) = self.lock().get_mut(&name) {
                tracked.decider.record(now(), value);
            }
        }
    }

    fn decide_all(&self) {
        let decisions: Vec<(String, u32)> = {
            let mut revisions = self.lock();
            revisions
                .iter_mut()
                .map(|(name, tracked)| {
                    let decision = tracked.decider.decide(now(), self.backend.ready_replicas(name));
                    let desired = decision.desired_pods;
                    tracked.last = Some(decision);
                    (name.clone(), desired)
                })
                .collect()
        };
        for (name, desired) in decisions {
            self.backend.scale(&name, desired);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tracked>> {
        self.revisions.lock().expect("autoscaler runner lock")
    }
}

#[cfg(test)]
mod tests;
