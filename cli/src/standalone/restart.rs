//! When to start a replica again after one failed: the kubelet's CrashLoopBackOff. The first
//! failure starts it again at once (a replica killed once comes back without a wait), the second
//! in a row waits [`BackOff::initial`] (10 s), each one after that doubles the wait up to
//! [`BackOff::max`] (5 min), and a replica that ran [`BackOff::reset_after`] (10 min) before it
//! failed starts the count again. Pure: the caller says how long the replica ran.

use std::time::Duration;

/// The back-off's settings (`skiff up --config`: `replicas.restartBackoff`, `replicas.maxRestartBackoff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackOff {
    /// Wait after the second failure in a row (the first is restarted at once).
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
    /// A replica that ran this long before failing was running fine: the count starts again.
    pub reset_after: Duration,
}

impl Default for BackOff {
    /// The kubelet's: 10 s doubling to 5 min, reset after 10 min of running.
    fn default() -> Self {
        BackOff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

/// A revision's failures in a row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrashLoop {
    failures: u32,
}

impl CrashLoop {
    /// A replica failed after running `ran` (zero when it could not start): the wait before the
    /// next one, zero after the first failure in a row.
    pub fn failed(&mut self, backoff: &BackOff, ran: Duration) -> Duration {
        if ran >= backoff.reset_after {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        let Some(doublings) = self.failures.checked_sub(2) else { return Duration::ZERO };
        let factor = 1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
        backoff.initial.checked_mul(factor).map_or(backoff.max, |d| d.min(backoff.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_at_once_then_doubles_from_ten_seconds_to_five_minutes() {
        let backoff = BackOff::default();
        let mut crash = CrashLoop::default();
        let waits: Vec<u64> = (0..9).map(|_| crash.failed(&backoff, Duration::ZERO).as_secs()).collect();
        assert_eq!(waits, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn ten_minutes_of_running_fine_start_the_count_again() {
        let backoff = BackOff::default();
        let mut crash = CrashLoop::default();
        for _ in 0..4 {
            crash.failed(&backoff, Duration::from_secs(30));
        }
        assert_eq!(crash.failed(&backoff, Duration::from_secs(599)), Duration::from_secs(80), "ran 9 min 59 s");
        assert_eq!(crash.failed(&backoff, Duration::from_secs(600)), Duration::ZERO, "ran 10 min");
        assert_eq!(crash.failed(&backoff, Duration::ZERO), Duration::from_secs(10), "counting again from one");
    }

    #[test]
    fn a_short_setting_doubles_the_same_way_and_never_overflows() {
        let backoff = BackOff {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(1),
            reset_after: Duration::from_secs(2),
        };
        let mut crash = CrashLoop::default();
        let waits: Vec<u128> = (0..6).map(|_| crash.failed(&backoff, Duration::ZERO).as_millis()).collect();
        assert_eq!(waits, [0, 200, 400, 800, 1000, 1000]);
        let huge = BackOff { initial: Duration::MAX, max: Duration::from_secs(300), ..backoff };
        let mut crash = CrashLoop { failures: u32::MAX - 1 };
        assert_eq!(crash.failed(&huge, Duration::ZERO), Duration::from_secs(300));
        assert_eq!(crash.failed(&huge, Duration::ZERO), Duration::from_secs(300));
    }
}
