//! Per-object retry back-off for failed reconciles: the first retry after [`FIRST`], each further
//! failure in a row doubling it up to [`MAX`]; a success starts the object over. A spec the
//! operator cannot realise is retried this way (its status says why), not at a fixed short period.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The wait after the first failure.
pub const FIRST: Duration = Duration::from_secs(5);
/// The longest wait.
pub const MAX: Duration = Duration::from_secs(300);

/// The wait after `failures` failures in a row (at least one): `FIRST × 2^(failures-1)`, at most [`MAX`].
pub fn delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST.saturating_mul(1 << doublings).min(MAX)
}

/// Failures in a row per object (keyed by uid), and when the last one was.
#[derive(Debug, Default)]
pub struct Backoff(Mutex<HashMap<String, (u32, Instant)>>);

impl Backoff {
    /// Records a failure of `uid` at `now`; returns how long to wait before the next try. Objects
    /// whose last failure is older than twice [`MAX`] are forgotten (they succeeded since, or are
    /// gone), so the map holds only objects that keep failing.
    pub fn fail(&self, uid: &str, now: Instant) -> Duration {
        let mut failures = self.0.lock().expect("backoff lock");
        failures.retain(|_, (_, at)| now.saturating_duration_since(*at) <= MAX * 2);
        let entry = failures.entry(uid.to_owned()).or_insert((0, now));
        *entry = (entry.0.saturating_add(1), now);
        delay(entry.0)
    }

    /// Records a success: the next failure of `uid` waits [`FIRST`] again.
    pub fn succeed(&self, uid: &str) {
        self.0.lock().expect("backoff lock").remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_five_seconds_to_five_minutes() {
        let secs: Vec<u64> = (1..=9).map(|n| delay(n).as_secs()).collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(delay(0), FIRST);
        assert_eq!(delay(u32::MAX), MAX);
    }

    #[test]
    fn each_object_backs_off_on_its_own_and_a_success_starts_it_over() {
        let backoff = Backoff::default();
        let t0 = Instant::now();
        let grows: Vec<u64> = (0..4).map(|i| backoff.fail("a", t0 + Duration::from_secs(i)).as_secs()).collect();
        assert_eq!(grows, [5, 10, 20, 40]);
        assert_eq!(backoff.fail("b", t0).as_secs(), 5, "another object starts at the first step");
        backoff.succeed("a");
        assert_eq!(backoff.fail("a", t0).as_secs(), 5);
    }

    #[test]
    fn objects_that_stopped_failing_are_forgotten() {
        let backoff = Backoff::default();
        let t0 = Instant::now();
        backoff.fail("gone", t0);
        backoff.fail("failing", t0);
        backoff.fail("failing", t0 + MAX * 2);
        assert_eq!(backoff.0.lock().unwrap().len(), 2, "within twice the longest wait: kept");
        backoff.fail("failing", t0 + MAX * 3);
        assert_eq!(backoff.0.lock().unwrap().len(), 1, "one failing object left: {backoff:?}");
        assert_eq!(backoff.fail("failing", t0 + MAX * 3).as_secs(), 40);
    }
}
