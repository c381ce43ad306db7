//! When a run is small enough to do on the async worker that received the request: handing a
//! 5 µs run to an inference thread costs two thread wake-ups, more than the run itself. Each model
//! keeps a moving average of its run time per input element (every run, inline or on a thread,
//! updates it); a request runs inline only when that average times its elements fits
//! [`INLINE_BUDGET`], so long inference never holds an async worker.
//!
//! The average is wall time, so it grows with the machine's load: the iris classifier runs in
//! 6–7 µs on a quiet 2-core machine and in 10–16 µs on the same machine busy compiling. The budget
//! leaves room for that: at 10 µs, a busy machine sent 28 % (1 connection) to 89 % (8 connections)
//! of iris requests to the threads, each through two wake-ups, when the wake-ups cost the most.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The longest run expected to be done on an async worker: within tokio's advice of 10 to 100 µs
/// between two `.await`s, and several times the small models' runs on a loaded machine.
pub const INLINE_BUDGET: Duration = Duration::from_micros(50);

/// No run seen yet: nothing fits until the threads have measured one.
const UNKNOWN: u64 = u64::MAX;

/// Weight of the newest run in the average: 1/8.
const SHIFT: u32 = 3;

/// A model's moving average of run time per input element, in picoseconds (so that a
/// nanosecond run over thousands of elements keeps its precision).
#[derive(Debug)]
pub struct RunCost {
    per_element_ps: AtomicU64,
}

impl Default for RunCost {
    fn default() -> RunCost {
        RunCost { per_element_ps: AtomicU64::new(UNKNOWN) }
    }
}

impl RunCost {
    /// Records a run of `elements` input elements that took `took`.
    pub fn observe(&self, took: Duration, elements: usize) {
        let sample =
            u64::try_from(took.as_nanos().saturating_mul(1000) / elements.max(1) as u128).unwrap_or(UNKNOWN - 1);
        // Racing updates may lose a sample; the average stays an average of real runs.
        let old = self.per_element_ps.load(Ordering::Relaxed);
        let new = if old == UNKNOWN { sample } else { old - (old >> SHIFT) + (sample >> SHIFT) };
        self.per_element_ps.store(new.min(UNKNOWN - 1), Ordering::Relaxed);
    }

    /// True when a run of `elements` input elements is expected to take at most `budget`.
    pub fn fits(&self, elements: usize, budget: Duration) -> bool {
        let per_element = self.per_element_ps.load(Ordering::Relaxed);
        per_element != UNKNOWN && u128::from(per_element) * elements.max(1) as u128 <= budget.as_nanos() * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn nothing_fits_before_a_run_is_measured() {
        assert!(!RunCost::default().fits(1, INLINE_BUDGET));
    }

    #[test]
    fn a_small_run_fits_and_a_large_request_of_the_same_model_does_not() {
        let cost = RunCost::default();
        cost.observe(4 * US, 4);
        assert!(cost.fits(4, INLINE_BUDGET));
        assert!(cost.fits(50, INLINE_BUDGET));
        assert!(!cost.fits(51, INLINE_BUDGET));
        assert!(!cost.fits(40_000, INLINE_BUDGET));
    }

    /// Iris's runs as measured on a 2-core machine busy compiling (Triton's statistics: input,
    /// run and output 10.7 µs on average at 1 connection, 15.5 µs at 64): still inline.
    #[test]
    fn a_small_model_stays_inline_on_a_loaded_machine() {
        let cost = RunCost::default();
        for took in [11, 16, 13, 24, 15, 12] {
            cost.observe(took * US, 4);
        }
        assert!(cost.fits(4, INLINE_BUDGET));
    }

    #[test]
    fn slow_runs_move_the_model_off_the_async_workers() {
        let cost = RunCost::default();
        cost.observe(2 * US, 4);
        assert!(cost.fits(4, INLINE_BUDGET));
        for _ in 0..32 {
            cost.observe(200 * US, 4);
        }
        assert!(!cost.fits(4, INLINE_BUDGET));
        for _ in 0..64 {
            cost.observe(2 * US, 4);
        }
        assert!(cost.fits(4, INLINE_BUDGET));
    }
}
