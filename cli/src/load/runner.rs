//! The I/O shell that plays a [`Scenario`]: cycles with idle gaps between them, closed-loop
//! workers, open-loop dispatch on schedule (latency from the time a request was due), bursts that
//! wait for the replicas to settle, and the replica sampler beside them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use super::client::{self, Connection, Failure, Pool, Target};
use super::coldstart;
use super::flags::Idle;
use super::phase::{self, Phase};
use super::record::{Cycle, Dispatch, REFUSED, Recorder, Sample};
use super::sampler::{ReplicaSource, Snapshot};
use super::scenario::{self, Closed, Scenario};

/// How a run is played.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Each cycle's shape.
    pub scenario: Scenario,
    /// Cycles.
    pub cycles: u32,
    /// The gap before each cycle after the first (or, `zero`, before each cycle).
    pub idle: Idle,
    /// Longest wait for zero replicas.
    pub zero_timeout: Duration,
    /// After a burst: how long the replicas must hold at what was asked for.
    pub settle: Duration,
    /// After a burst: the longest wait for that.
    pub settle_limit: Duration,
    /// Most requests in flight at once.
    pub max_inflight: usize,
}

/// The latest sample and when it was taken.
pub type Latest = watch::Receiver<Option<(Instant, Snapshot)>>;

/// Plays `plan` against `target`; `latest` carries replica samples when there is a source.
pub async fn play(plan: &Plan, target: Arc<Target>, recorder: Arc<Recorder>, mut latest: Option<Latest>) {
    let pool = Arc::new(Pool::new(plan.max_inflight));
    if let Some(latest) = latest.as_mut() {
        // A baseline before the first request: the replicas unchanged over a few samples, so that
        // a change already under way (a replica --model's metadata request woke) is not the load's.
        let replicas = |s: &Snapshot| Some(s.ready().saturating_mul(100_000).saturating_add(s.desired()));
        hold(latest, BASELINE_HOLD, BASELINE_LIMIT, replicas).await;
    }
    for cycle in 0..plan.cycles {
        match (plan.idle, latest.as_mut()) {
            (Idle::For(gap), _) if cycle > 0 && !gap.is_zero() => {
                eprintln!("skiff load: idle for {gap:?} before cycle {}", cycle + 1);
                tokio::time::sleep(gap).await;
            }
            (Idle::UntilZero, Some(latest)) => wait_for_zero(latest, plan.zero_timeout, cycle + 1).await,
            _ => {}
        }
        let began = recorder.elapsed(Instant::now());
        let ok_before = recorder.with(|r| r.ok());
        match &plan.scenario {
            Scenario::Closed(closed) => closed_loop(closed, plan.max_inflight, &target, &recorder).await,
            Scenario::Burst(n) => burst(*n, &target, &recorder).await,
            Scenario::Rate { rate, duration } => {
                let dispatch = open_loop(*rate, *duration, plan.max_inflight, &target, &recorder, &pool).await;
                recorder.with(|r| r.dispatches.push(dispatch));
            }
        }
        let loaded = recorder.elapsed(Instant::now());
        if let (Scenario::Burst(_), Some(latest)) = (&plan.scenario, latest.as_mut()) {
            settle(latest, plan.settle, plan.settle_limit).await;
        }
        let ended = recorder.elapsed(Instant::now());
        recorder.with(|r| r.cycles.push(Cycle { began, loaded, ended, ok: r.ok() - ok_before }));
    }
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<Recorder>);

impl InFlight {
    fn enter(recorder: &Arc<Recorder>) -> InFlight {
        recorder.enter();
        InFlight(recorder.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// Records one request that was due at `due` and got `outcome`.
fn finish(recorder: &Recorder, due: Instant, phase: Option<Phase>, outcome: &client::Outcome) {
    let done = Instant::now();
    let kind = client::error_kind(outcome);
    let held = outcome.as_ref().ok().and_then(|a| a.held);
    let stream = outcome.as_ref().ok().filter(|_| kind.is_none()).and_then(|a| a.stream.clone());
    let sent = recorder.elapsed(due);
    recorder.with(|r| {
        r.add(sent, phase, done.saturating_duration_since(due), kind, held);
        if let Some(stream) = stream {
            r.add_stream(sent, phase, held.is_some(), stream);
        }
    });
}

async fn closed_loop(closed: &Closed, max_inflight: usize, target: &Arc<Target>, recorder: &Arc<Recorder>) {
    let start = Instant::now();
    let mut workers = JoinSet::new();
    for k in 0..closed.peak().min(max_inflight) {
        let (closed, target, recorder) = (closed.clone(), target.clone(), recorder.clone());
        workers.spawn(async move {
            let total = closed.total();
            let mut connection: Connection = None;
            loop {
                let now = Instant::now();
                let t = now - start;
                if t >= total {
                    break;
                }
                if k >= closed.concurrency_at(t) {
                    tokio::time::sleep((total - t).min(Duration::from_millis(20))).await;
                    continue;
                }
                let phase = recorder.phase();
                let guard = InFlight::enter(&recorder);
                let outcome = client::exchange(&target, &mut connection).await;
                drop(guard);
                finish(&recorder, now, phase, &outcome);
                if matches!(outcome, Err(Failure::Connect(_))) {
                    // Nothing listens: do not spin on refused connections.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
}

async fn burst(n: usize, target: &Arc<Target>, recorder: &Arc<Recorder>) {
    let due = Instant::now();
    let phase = recorder.phase();
    let mut requests = JoinSet::new();
    for _ in 0..n {
        let (target, recorder) = (target.clone(), recorder.clone());
        let guard = InFlight::enter(&recorder);
        requests.spawn(async move {
            let mut connection: Connection = None;
            let outcome = client::exchange(&target, &mut connection).await;
            drop(guard);
            finish(&recorder, due, phase, &outcome);
        });
    }
    while requests.join_next().await.is_some() {}
}

async fn open_loop(
    rate: f64,
    duration: Duration,
    max_inflight: usize,
    target: &Arc<Target>,
    recorder: &Arc<Recorder>,
    pool: &Arc<Pool>,
) -> Dispatch {
    let start = Instant::now();
    let mut requests = JoinSet::new();
    let (mut first, mut last, mut sent) = (None, start, 0);
    for i in 0..scenario::arrivals(rate, duration) {
        let due = start + scenario::arrival(i, rate);
        tokio::time::sleep_until(due.into()).await;
        while requests.try_join_next().is_some() {}
        if recorder.in_flight.load(Ordering::Relaxed) >= max_inflight {
            recorder.with(|r| r.refuse(REFUSED));
            continue;
        }
        let now = Instant::now();
        first.get_or_insert(now);
        last = now;
        sent += 1;
        let phase = recorder.phase();
        let guard = InFlight::enter(recorder);
        let (target, recorder, pool) = (target.clone(), recorder.clone(), pool.clone());
        requests.spawn(async move {
            let outcome = pool.exchange(&target).await;
            drop(guard);
            finish(&recorder, due, phase, &outcome);
        });
    }
    while requests.join_next().await.is_some() {}
    Dispatch { sent, span: last.saturating_duration_since(first.unwrap_or(last)) }
}

/// How long the replicas must stay unchanged before the first cycle, and the longest wait for it.
const BASELINE_HOLD: Duration = Duration::from_millis(500);
const BASELINE_LIMIT: Duration = Duration::from_secs(5);

/// How long the service must stay at zero before a cycle starts: a burst sent the moment the
/// autoscaler said zero could still meet the replica being stopped.
const ZERO_HOLD: Duration = Duration::from_secs(1);

async fn wait_for_zero(latest: &mut Latest, limit: Duration, cycle: u32) {
    // Nothing ready and nothing asked for: a replica already starting would not be a cold start.
    let at_zero = |s: &Snapshot| (s.ready() == 0 && s.desired() == 0).then_some(0);
    if latest.borrow().as_ref().and_then(|(_, s)| at_zero(s)).is_none() {
        eprintln!("skiff load: waiting for the service to scale to zero before cycle {cycle}");
    }
    if !hold(latest, ZERO_HOLD, limit, at_zero).await {
        eprintln!("skiff load: the service did not reach zero within {limit:?}; cycle {cycle} starts anyway");
    }
}

/// Waits until the replicas are ready as asked for, without a change, for `hold`; at most `limit`.
async fn settle(latest: &mut Latest, hold_for: Duration, limit: Duration) {
    let settled = |s: &Snapshot| (s.ready() == s.desired()).then_some(s.ready());
    if !hold(latest, hold_for, limit, settled).await {
        eprintln!("skiff load: the replicas did not settle within {limit:?}");
    }
}

/// Waits until samples taken from now on give `state` the same value for `hold_for`; false when
/// `limit` passes first (or the samples stop).
async fn hold(
    latest: &mut Latest,
    hold_for: Duration,
    limit: Duration,
    state: impl Fn(&Snapshot) -> Option<u32>,
) -> bool {
    let since = Instant::now();
    let deadline = since + limit;
    let mut held: Option<(Instant, u32)> = None;
    loop {
        let current = latest.borrow_and_update().clone();
        if let Some((at, snapshot)) = current.filter(|(at, _)| *at >= since) {
            held = match (held, state(&snapshot)) {
                (Some((from, was)), Some(now)) if was == now => Some((from, was)),
                (_, Some(now)) => Some((at, now)),
                (_, None) => None,
            };
            if held.is_some_and(|(from, _)| at.saturating_duration_since(from) >= hold_for) {
                return true;
            }
        }
        if !matches!(tokio::time::timeout_at(deadline.into(), latest.changed()).await, Ok(Ok(()))) {
            return false;
        }
    }
}

/// Every `every` until `stop` fires, then once more: records the requests in flight and, with a
/// source, samples the replicas into the record and `latest`.
pub async fn sample(
    source: Option<Box<dyn ReplicaSource>>,
    every: Duration,
    recorder: Arc<Recorder>,
    latest: watch::Sender<Option<(Instant, Snapshot)>>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut previous: Option<Snapshot> = None;
    let mut failing = false;
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = ticker.tick() => false,
            _ = &mut stop => true,
        };
        let asked = Instant::now();
        let at = recorder.elapsed(asked);
        let peak = recorder.take_peak();
        recorder.with(|r| r.in_flight.push((at, peak)));
        let Some(source) = source.as_ref() else {
            if last {
                return;
            }
            continue;
        };
        match source.sample().await {
            Ok(snapshot) => {
                if failing {
                    eprintln!("skiff load: replica samples are back from {}", source.describe());
                    failing = false;
                }
                let starts = previous.as_ref().map_or(0, |p| phase::starts(p, &snapshot));
                let cold = previous.as_ref().map(|p| coldstart::from_zero(p, &snapshot)).unwrap_or_default();
                let (ready, desired) = (snapshot.ready(), snapshot.desired());
                recorder.set_phase(phase::classify(ready, desired));
                let panic = snapshot.panic().unwrap_or(false);
                recorder.with(|r| {
                    r.samples.push(Sample { at, ready, desired, starts, panic });
                    r.cold_starts.extend(cold.into_iter().map(|c| (at, c)));
                });
                previous = Some(snapshot.clone());
                latest.send_replace(Some((asked, snapshot)));
            }
            Err(e) if !failing => {
                eprintln!("skiff load: no replica sample from {}: {e:#}", source.describe());
                failing = true;
            }
            Err(_) => {}
        }
        if last {
            return;
        }
    }
}
