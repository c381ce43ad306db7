//! Cold starts as the data plane sees them, one rule for the router and the activator in both
//! modes: a cold start begins when a request arrives while its revision has no ready replica (the
//! activator holds it and asks the autoscaler to scale from zero), reaches its first ready replica
//! when that request gets a slot on one, and ends when that first held request is answered.
//! Requests arriving meanwhile are part of the same cold start. The tracker keeps the recent
//! durations for `skiff get`; the components turn them into histograms.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Cold starts remembered for [`ColdStart::summary`].
const RECENT: usize = 64;

/// One revision's cold starts, as one component sees them.
#[derive(Debug, Default)]
pub struct ColdStart {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// When the cold start in progress began.
    began: Option<Instant>,
    /// Durations to the answer of the first held request, newest last.
    recent: VecDeque<Duration>,
}

/// The first request held in a cold start; give it back with [`ColdStart::answered`] or
/// [`ColdStart::abandoned`].
#[derive(Debug)]
#[must_use = "the cold start stays in progress until its first request is answered or abandoned"]
pub struct FirstHeld {
    began: Instant,
}

impl FirstHeld {
    /// Time since the cold start began.
    pub fn elapsed(&self) -> Duration {
        self.began.elapsed()
    }
}

/// The last and the median of the recent cold starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdStartSummary {
    /// The newest one: first held request to its answer.
    pub last: Duration,
    /// The median of the recent ones.
    pub p50: Duration,
}

impl ColdStart {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request arrived while the revision had no ready replica (call only then: the check is the
    /// caller's lock-free read of its ready set). Returns the cold start's first held request when
    /// none was in progress.
    pub fn arrived_at_zero(&self) -> Option<FirstHeld> {
        let mut state = self.state();
        if state.began.is_some() {
            return None;
        }
        let began = Instant::now();
        state.began = Some(began);
        Some(FirstHeld { began })
    }

    /// The first held request was answered: the cold start is over. Returns its duration.
    pub fn answered(&self, first: FirstHeld) -> Duration {
        let took = first.began.elapsed();
        let mut state = self.state();
        state.began = None;
        if state.recent.len() == RECENT {
            state.recent.pop_front();
        }
        state.recent.push_back(took);
        took
    }

    /// The first held request failed or was cancelled: the next request at zero begins a new cold start.
    pub fn abandoned(&self, first: FirstHeld) {
        drop(first);
        self.state().began = None;
    }

    /// The last and the median of the recent cold starts; `None` before the first.
    pub fn summary(&self) -> Option<ColdStartSummary> {
        let state = self.state();
        let last = *state.recent.back()?;
        let mut sorted: Vec<Duration> = state.recent.iter().copied().collect();
        sorted.sort_unstable();
        Some(ColdStartSummary { last, p50: sorted[(sorted.len() - 1) / 2] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_request_at_zero_begins_a_cold_start() {
        let cold = ColdStart::default();
        let first = cold.arrived_at_zero().expect("the first request at zero begins one");
        assert!(cold.arrived_at_zero().is_none(), "a second request joins the same cold start");
        cold.answered(first);
        assert!(cold.arrived_at_zero().is_some(), "after the answer the next request at zero begins another");
    }

    #[test]
    fn an_abandoned_cold_start_is_not_counted() {
        let cold = ColdStart::default();
        cold.abandoned(cold.arrived_at_zero().unwrap());
        assert_eq!(cold.summary(), None);
        assert!(cold.arrived_at_zero().is_some());
    }

    #[test]
    fn the_summary_has_the_last_and_the_median() {
        let cold = ColdStart::default();
        for millis in [30, 10, 20] {
            let first = cold.arrived_at_zero().unwrap();
            let first = FirstHeld { began: first.began - Duration::from_millis(millis) };
            let took = cold.answered(first);
            assert!(took >= Duration::from_millis(millis));
        }
        let summary = cold.summary().unwrap();
        assert!(summary.last >= Duration::from_millis(20) && summary.last < Duration::from_millis(30), "{summary:?}");
        assert!(summary.p50 >= Duration::from_millis(20) && summary.p50 < Duration::from_millis(30), "{summary:?}");
    }
}
