//! The runner: the I/O shell around the autoscaler's deciders, one per revision (keyed by
//! namespace and name, as Knative's multiscaler). Every second it samples each revision's metric
//! (concurrency or requests per second) from a [`MetricSource`], adds the requests the activator
//! reported holding ([`Runner::report_held`]) and records it; every tick it asks each decider for
//! a decision and hands the desired count to a [`ReplicaBackend`]. A poke (a request waiting at
//! zero replicas) carries the activator's held count as its stat, as Knative's multiscaler `Poke`
//! does: the count is recorded in the decider's windows, then the decider decides at once, so a
//! burst at zero enters panic mode in the decider itself and is held for a stable window.
//! When a revision gives up starting (its activation timed out: no replica ready within the
//! progress deadline plus Knative's buffer), the runner logs a warning, and its journal records it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use skiff_autoscaler::{Decider, Decision, Metric, ScalingSpec, activation};
use tokio::time::{Instant, MissedTickBehavior};

use crate::key::RevisionKey;

pub mod journal;

use journal::{Journal, Step};

/// Where replicas come from: Deployments' scale in Kubernetes, child processes in standalone mode.
pub trait ReplicaBackend: Send + Sync + 'static {
    /// Asks for `replicas` replicas of `revision`; returns at once, the backend converges in the background.
    fn scale(&self, revision: &RevisionKey, replicas: u32);
    /// Replicas of `revision` that are ready now.
    fn ready_replicas(&self, revision: &RevisionKey) -> u32;
}

/// Where the scaling metric comes from: for concurrency, requests in flight at the revision's
/// replicas (the activator's held requests are reported separately); for rps, requests arriving
/// for the revision per second.
pub trait MetricSource: Send + Sync + 'static {
    /// `revision`'s value of `metric` now (rps: over the time since the previous observation);
    /// `None` when there is no reading this time (no pod answered), so nothing is recorded.
    fn observe(&self, revision: &RevisionKey, metric: Metric) -> impl Future<Output = Option<f64>> + Send;
}

/// Tells the autoscaler that requests wait for a revision: the activator calls it when a request
/// arrives for a revision with no ready replica, with the number of requests it holds for it.
pub trait Poker: Send + Sync {
    /// `held` requests wait for `revision`, which has no ready replica; decide now.
    fn poke(&self, revision: &RevisionKey, held: usize);
}

/// The source name of the activator that runs in the same process (`skiff up`).
pub const LOCAL_ACTIVATOR: &str = "local";
/// How long an activator's report counts: one that stops reporting (gone) stops counting.
const HELD_TTL: Duration = Duration::from_secs(3);

struct Tracked {
    decider: Decider,
    last: Option<Decision>,
    held: Held,
    /// How much of the held total pokes have recorded since the last sample, so that the sample
    /// adds only what is new and a held request counts once a second.
    held_recorded: usize,
    /// Whether the activators held requests at the last sample.
    was_held: bool,
    journal: Journal,
}

impl Tracked {
    fn new(decider: Decider, epoch: std::time::Instant) -> Tracked {
        Tracked {
            decider,
            last: None,
            held: Held::default(),
            held_recorded: 0,
            was_held: false,
            journal: Journal::new(epoch),
        }
    }

    /// Records `value` in the decider's windows (and the journal).
    fn record(&mut self, value: f64) {
        let now = now();
        self.decider.record(now, value);
        self.journal.recorded(now, value);
    }

    /// Decides with `ready` pods (at once for a waiting request when `poke`); keeps the decision,
    /// and says so when `revision` gives up starting.
    fn decide(&mut self, revision: &RevisionKey, ready: u32, poke: bool) -> u32 {
        let now = now();
        let decision = if poke { self.decider.poke(now, ready) } else { self.decider.decide(now, ready) };
        self.journal.decided(now, ready, &decision, poke);
        if decision.activation_timed_out && !self.last.as_ref().is_some_and(|d| d.activation_timed_out) {
            let message = activation::timed_out_message(self.decider.spec().progress_deadline);
            tracing::warn!(%revision, "{message}");
        }
        let desired = decision.desired_pods;
        self.last = Some(decision);
        desired
    }

    /// The held requests not recorded since the last sample; counts them as recorded.
    fn unrecorded_held(&mut self) -> usize {
        let total = self.held.total();
        let new = total.saturating_sub(self.held_recorded);
        self.held_recorded = self.held_recorded.max(total);
        new
    }
}

/// The requests each activator last reported holding for one revision (several activators hold
/// requests for the same revision; their counts add up).
#[derive(Default)]
struct Held(HashMap<String, (usize, std::time::Instant)>);

impl Held {
    fn set(&mut self, source: &str, held: usize) {
        self.0.insert(source.to_owned(), (held, now()));
    }

    /// The sum of the reports that are recent enough.
    fn total(&mut self) -> usize {
        let now = now();
        self.0.retain(|_, (_, at)| now.saturating_duration_since(*at) < HELD_TTL);
        self.0.values().map(|(held, _)| held).sum()
    }
}

/// Drives one decider per revision.
pub struct Runner<B, S> {
    backend: Arc<B>,
    source: Arc<S>,
    tick: Duration,
    revisions: Mutex<HashMap<RevisionKey, Tracked>>,
}

fn now() -> std::time::Instant {
    Instant::now().into_std()
}

impl<B: ReplicaBackend, S: MetricSource> Runner<B, S> {
    /// A runner that decides every `tick`.
    pub fn new(backend: Arc<B>, source: Arc<S>, tick: Duration) -> Arc<Self> {
        Arc::new(Runner { backend, source, tick, revisions: Mutex::new(HashMap::new()) })
    }

    /// Starts autoscaling a new `revision`; it is scaled to its initial scale at once.
    pub fn add(&self, revision: &RevisionKey, spec: ScalingSpec) {
        let epoch = now();
        let mut tracked = Tracked::new(Decider::new(spec, epoch), epoch);
        let desired = tracked.decide(revision, self.backend.ready_replicas(revision), false);
        self.backend.scale(revision, desired);
        self.lock().insert(revision.clone(), tracked);
    }

    /// Takes over a `revision` that already runs (after this autoscaler restarted) from the
    /// replicas ready now, without scaling it: a live revision keeps its replicas.
    pub fn resume(&self, revision: &RevisionKey, spec: ScalingSpec) {
        let epoch = now();
        let decider = Decider::resume(spec, epoch, self.backend.ready_replicas(revision));
        self.lock().insert(revision.clone(), Tracked::new(decider, epoch));
    }

    /// The revisions autoscaled now.
    pub fn revisions(&self) -> Vec<RevisionKey> {
        self.lock().keys().cloned().collect()
    }

    /// Whether `revision` is autoscaled.
    pub fn contains(&self, revision: &RevisionKey) -> bool {
        self.lock().contains_key(revision)
    }

    /// Replaces the settings of a tracked `revision` (a changed `config-autoscaler`): a decider
    /// resumed from the replicas it has or was last asked to have, so a new setting never drops
    /// replicas before its windows have data.
    pub fn update(&self, revision: &RevisionKey, spec: ScalingSpec) {
        let ready = self.backend.ready_replicas(revision);
        if let Some(tracked) = self.lock().get_mut(revision)
            && *tracked.decider.spec() != spec
        {
            let asked = tracked.last.as_ref().map_or(0, |d| d.desired_pods);
            let epoch = now();
            tracked.decider = Decider::resume(spec, epoch, ready.max(asked));
            tracked.journal = Journal::new(epoch);
        }
    }

    /// Stops autoscaling `revision` (the caller removes its replicas).
    pub fn remove(&self, revision: &RevisionKey) {
        self.lock().remove(revision);
    }

    /// The activator `source` holds `held` requests for `revision` now (reported about once a
    /// second); with what other activators report, they count in its concurrency.
    pub fn report_held(&self, revision: &RevisionKey, source: &str, held: usize) {
        if let Some(tracked) = self.lock().get_mut(revision) {
            tracked.held.set(source, held);
        }
    }

    /// The activator `source` holds `held` requests for `revision`: when it has no ready replica,
    /// record what the activators hold that is not recorded yet (Knative's poke carries its stat)
    /// and decide now. The decider sizes the step from the held requests and, for a burst, enters
    /// panic mode, so it never asks for fewer pods until the burst has left its stable window.
    pub fn poke(&self, revision: &RevisionKey, source: &str, held: usize) {
        let ready = self.backend.ready_replicas(revision);
        if ready > 0 {
            return;
        }
        let desired = {
            let mut revisions = self.lock();
            let Some(tracked) = revisions.get_mut(revision) else { return };
            tracked.held.set(source, held);
            let new = tracked.unrecorded_held();
            if new > 0 {
                tracked.record(new as f64);
            }
            tracked.decide(revision, ready, true)
        };
        self.backend.scale(revision, desired);
    }

    /// The latest decision of every revision that has one.
    pub fn decisions(&self) -> Vec<(RevisionKey, Decision)> {
        self.lock().iter().filter_map(|(key, t)| Some((key.clone(), t.last.clone()?))).collect()
    }

    /// What `revision`'s decider was fed and answered, oldest first (see [`journal`]).
    pub fn journal(&self, revision: &RevisionKey) -> Option<Vec<Step>> {
        self.lock().get(revision).map(|t| t.journal.steps())
    }

    /// The latest decision for `revision`.
    pub fn decision(&self, revision: &RevisionKey) -> Option<Decision> {
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
        let revisions: Vec<(RevisionKey, Metric)> =
            self.lock().iter().map(|(key, tracked)| (key.clone(), tracked.decider.spec().metric)).collect();
        let observed =
            futures::future::join_all(revisions.iter().map(|(key, metric)| self.source.observe(key, *metric))).await;
        let mut tracked = self.lock();
        for ((key, metric), value) in revisions.into_iter().zip(observed) {
            let Some(tracked) = tracked.get_mut(&key) else { continue };
            let concurrency = metric == Metric::Concurrency;
            let held_now = concurrency && tracked.held.total() > 0;
            let held = if concurrency { tracked.unrecorded_held() } else { 0 };
            tracked.held_recorded = 0;
            let held_gone = std::mem::replace(&mut tracked.was_held, held_now) && !held_now;
            // Without a reading from the pods (none ready, or none answered), the activators'
            // report is still a stat, as Knative records the activator's stats on their own; and
            // once their requests are gone (answered, or their clients left), Knative's activator
            // reports the revision once more, with 0, so that a revision still starting sees its
            // demand fall to none.
            match (value, held) {
                (Some(value), held) => tracked.record(value + held as f64),
                (None, held) if held > 0 => tracked.record(held as f64),
                (None, _) if held_gone => tracked.record(0.0),
                (None, _) => {}
            }
        }
    }

    fn decide_all(&self) {
        let decisions: Vec<(RevisionKey, u32)> = {
            let mut revisions = self.lock();
            revisions
                .iter_mut()
                .map(|(name, tracked)| (name.clone(), tracked.decide(name, self.backend.ready_replicas(name), false)))
                .collect()
        };
        for (name, desired) in decisions {
            self.backend.scale(&name, desired);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RevisionKey, Tracked>> {
        self.revisions.lock().expect("autoscaler runner lock")
    }
}

impl<B: ReplicaBackend, S: MetricSource> Poker for Runner<B, S> {
    fn poke(&self, revision: &RevisionKey, held: usize) {
        Runner::poke(self, revision, LOCAL_ACTIVATOR, held);
    }
}

#[cfg(test)]
mod tests;
