//! What a run records as it goes: HDR histograms of latency (all, per phase, of the requests that
//! met a cold start, per second of send time, and since the last progress line), errors by kind,
//! the replica samples, each cycle's time under load, and how far the open-loop sender kept to its
//! schedule.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::coldstart::ColdStart;
use super::openai::Stream;
use super::openai::summary::Timed;
use super::phase::Phase;

/// Latencies are recorded in microseconds, up to an hour, to 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_max(3_600_000_000, 3).expect("valid histogram bounds")
}

/// One second of send time.
#[derive(Debug, Clone)]
pub struct Second {
    /// Requests sent in it that got an answer or failed.
    pub done: u64,
    /// Of those, errors.
    pub errors: u64,
    /// Their latencies (µs), 2 significant digits.
    pub latency: Histogram<u64>,
}

impl Default for Second {
    fn default() -> Self {
        Second { done: 0, errors: 0, latency: Histogram::new(2).expect("valid histogram") }
    }
}

/// One replica sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Since the run began.
    pub at: Duration,
    /// Ready replicas.
    pub ready: u32,
    /// Replicas asked for.
    pub desired: u32,
    /// Replicas that became ready since the previous sample.
    pub starts: u32,
    /// The autoscaler was in panic mode (false where the source does not tell).
    pub panic: bool,
}

/// How far one open-loop cycle kept to its schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dispatch {
    /// Requests sent.
    pub sent: u64,
    /// From the first send to the last.
    pub span: Duration,
}

/// One cycle, in time since the run began.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cycle {
    /// Its first request.
    pub began: Duration,
    /// Its last answer: the end of its time under load.
    pub loaded: Duration,
    /// Its end (after a burst, once the replicas settled).
    pub ended: Duration,
    /// Its answers that were not errors.
    pub ok: u64,
}

impl Cycle {
    /// Its time under load.
    pub fn under_load(&self) -> Duration {
        self.loaded.saturating_sub(self.began)
    }
}

/// Everything recorded.
#[derive(Debug, Clone)]
pub struct Record {
    /// Every request's latency (µs), answered or not (never the ones not sent).
    pub latency: Histogram<u64>,
    /// Latency by the phase the request was sent in.
    pub phases: [Histogram<u64>; 3],
    /// Latency of the requests whose answers say they met a cold start.
    pub met_zero: Histogram<u64>,
    /// How long those were held for a ready replica (µs).
    pub held: Histogram<u64>,
    /// Requests done.
    pub done: u64,
    /// Errors by kind.
    pub errors: BTreeMap<String, u64>,
    /// By second of send time since the run began.
    pub seconds: Vec<Second>,
    /// Replica samples.
    pub samples: Vec<Sample>,
    /// Revisions that started from zero, at the sample that saw them ready.
    pub cold_starts: Vec<(Duration, ColdStart)>,
    /// The most requests in flight in each sampling interval (with or without a replica source).
    pub in_flight: Vec<(Duration, usize)>,
    /// The open-loop cycles' schedules kept.
    pub dispatches: Vec<Dispatch>,
    /// The cycles.
    pub cycles: Vec<Cycle>,
    /// Latencies since the last progress line.
    pub window: Histogram<u64>,
    /// Requests and errors since the last progress line.
    pub window_done: (u64, u64),
    /// `--openai`: the answered streams, timed.
    pub streams: Vec<Timed>,
}

impl Default for Record {
    fn default() -> Self {
        Record {
            latency: histogram(),
            phases: [histogram(), histogram(), histogram()],
            met_zero: histogram(),
            held: histogram(),
            done: 0,
            errors: BTreeMap::new(),
            seconds: Vec::new(),
            samples: Vec::new(),
            cold_starts: Vec::new(),
            in_flight: Vec::new(),
            dispatches: Vec::new(),
            cycles: Vec::new(),
            window: histogram(),
            window_done: (0, 0),
            streams: Vec::new(),
        }
    }
}

impl Record {
    /// Adds one request sent at `sent` (since the run began) while the samples said `phase`,
    /// that took `latency`; `held` when its answer says it met a cold start. Its phase is at zero
    /// when the answer says so; a request answered without being held met a ready replica, so it
    /// was not at zero whatever the last sample said (it is counted as scaling).
    pub fn add(
        &mut self,
        sent: Duration,
        phase: Option<Phase>,
        latency: Duration,
        error: Option<String>,
        held: Option<Duration>,
    ) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).max(1);
        self.latency.saturating_record(micros);
        if let Some(held) = held {
            self.met_zero.saturating_record(micros);
            self.held.saturating_record(u64::try_from(held.as_micros()).unwrap_or(u64::MAX).max(1));
        }
        if let Some(phase) = attributed(phase, held.is_some(), error.is_none()) {
            self.phases[phase.index()].saturating_record(micros);
        }
        self.window.saturating_record(micros);
        self.done += 1;
        self.window_done.0 += 1;
        let second = sent.as_secs() as usize;
        if self.seconds.len() <= second {
            self.seconds.resize_with(second + 1, Second::default);
        }
        let bucket = &mut self.seconds[second];
        bucket.done += 1;
        let _ = bucket.latency.record(micros);
        if let Some(kind) = error {
            bucket.errors += 1;
            self.window_done.1 += 1;
            *self.errors.entry(kind).or_default() += 1;
        }
    }

    /// Adds one answered stream sent at `sent` while the samples said `phase`; `held` when its
    /// answer says it met a cold start (its phase is attributed as a request's latency is).
    pub fn add_stream(&mut self, sent: Duration, phase: Option<Phase>, held: bool, stream: Stream) {
        let phase = attributed(phase, held, true);
        self.streams.push(Timed { sent, phase, cold: held, stream });
    }

    /// Counts a request that was due but not sent (too many in flight).
    pub fn refuse(&mut self, kind: &str) {
        *self.errors.entry(kind.to_owned()).or_default() += 1;
    }

    /// Answers that were not errors.
    pub fn ok(&self) -> u64 {
        self.done - (self.error_count() - self.refused())
    }

    /// Errors of every kind.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// Requests sent or refused.
    pub fn requests(&self) -> u64 {
        self.done + self.refused()
    }

    /// Requests refused for lack of room.
    pub fn refused(&self) -> u64 {
        self.errors.get(REFUSED).copied().unwrap_or(0)
    }
}

/// The phase a request counts in: at zero when its answer says it met a cold start, else the
/// sampled phase, but a request answered at once while the samples said zero counts as scaling.
pub(super) fn attributed(sampled: Option<Phase>, held: bool, answered: bool) -> Option<Phase> {
    match sampled? {
        _ if held => Some(Phase::AtZero),
        Phase::AtZero if answered => Some(Phase::Scaling),
        phase => Some(phase),
    }
}

/// The error kind of a request not sent because `--max-inflight` were in flight.
pub const REFUSED: &str = "not sent: --max-inflight reached";

/// The record shared by the senders, the sampler and the progress line.
pub struct Recorder {
    /// When the run began.
    pub start: Instant,
    /// Requests in flight.
    pub in_flight: AtomicUsize,
    /// The most in flight since the sampler last looked.
    pub peak: AtomicUsize,
    phase: AtomicU8,
    record: Mutex<Record>,
}

const NO_PHASE: u8 = u8::MAX;

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Recorder {
        Recorder {
            start: Instant::now(),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            phase: AtomicU8::new(NO_PHASE),
            record: Mutex::new(Record::default()),
        }
    }

    /// The phase of the latest sample, if any.
    pub fn phase(&self) -> Option<Phase> {
        Phase::ALL.get(usize::from(self.phase.load(Ordering::Relaxed))).copied()
    }

    /// Sets the phase new requests are sent in.
    pub fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }

    /// Counts one more request in flight.
    pub fn enter(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// Counts one request less in flight.
    pub fn leave(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// The most in flight since the last call (at least those in flight now).
    pub fn take_peak(&self) -> usize {
        let now = self.in_flight.load(Ordering::Relaxed);
        self.peak.swap(now, Ordering::Relaxed).max(now)
    }

    /// Runs `f` on the record.
    pub fn with<T>(&self, f: impl FnOnce(&mut Record) -> T) -> T {
        f(&mut self.record.lock().expect("record lock"))
    }

    /// Time since the run began.
    pub fn elapsed(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.start)
    }

    /// The record, once the run is over.
    pub fn into_record(self) -> Record {
        self.record.into_inner().expect("record lock")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_land_in_their_send_second_and_phase() {
        let mut record = Record::default();
        let ms = Duration::from_millis;
        record.add(ms(100), Some(Phase::AtZero), ms(800), None, Some(ms(700)));
        record.add(ms(2500), Some(Phase::Steady), ms(2), Some("HTTP 503".into()), None);
        record.refuse(REFUSED);
        assert_eq!((record.done, record.requests(), record.error_count(), record.refused()), (2, 3, 2, 1));
        assert_eq!(record.seconds.len(), 3);
        assert_eq!((record.seconds[2].done, record.seconds[2].errors), (1, 1));
        assert_eq!(record.phases[Phase::AtZero.index()].len(), 1);
        assert!(record.latency.max() >= 799_000);
        assert_eq!((record.met_zero.len(), record.ok()), (1, 1));
    }

    #[test]
    fn only_a_request_whose_answer_says_so_met_zero() {
        let mut record = Record::default();
        let ms = Duration::from_millis;
        // Sampled at zero, but answered at once by a replica that was ready: not a cold start.
        record.add(ms(10), Some(Phase::AtZero), ms(1), None, None);
        // Sampled steady, but held by the activator (the replica had just gone): a cold start.
        record.add(ms(20), Some(Phase::Steady), ms(90), None, Some(ms(85)));
        // A failure while sampled at zero keeps that phase.
        record.add(ms(30), Some(Phase::AtZero), ms(5), Some("HTTP 503".into()), None);
        let counts: Vec<u64> = record.phases.iter().map(Histogram::len).collect();
        assert_eq!(counts, [2, 1, 0]);
        assert_eq!(record.met_zero.len(), 1);
        assert!(record.met_zero.min() >= 89_000 && record.held.max() < 90_000);
    }

    #[test]
    fn the_phase_is_unknown_until_a_sample_sets_it() {
        let recorder = Recorder::new();
        assert_eq!(recorder.phase(), None);
        recorder.set_phase(Phase::Scaling);
        assert_eq!(recorder.phase(), Some(Phase::Scaling));
    }
}
