//! What the replica samples say, as pure functions: the phase a request is sent in (at zero,
//! scaling, steady), the replicas that started between two samples, and how long a cycle took to
//! reach the replicas it needed.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;

use super::sampler::Snapshot;

/// The service's state when a request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// No ready replica: the request waits for a cold start.
    AtZero,
    /// Fewer ready replicas than the autoscaler asked for.
    Scaling,
    /// As many ready replicas as asked for (or more, while scaling down).
    Steady,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 3] = [Phase::AtZero, Phase::Scaling, Phase::Steady];

    /// Index into per-phase arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in tables and charts.
    pub fn label(self) -> &'static str {
        match self {
            Phase::AtZero => "at zero",
            Phase::Scaling => "scaling",
            Phase::Steady => "steady",
        }
    }
}

/// The phase of a service with `ready` replicas of the `desired`.
pub fn classify(ready: u32, desired: u32) -> Phase {
    if ready == 0 {
        Phase::AtZero
    } else if ready < desired {
        Phase::Scaling
    } else {
        Phase::Steady
    }
}

/// Replicas that became ready between `before` and `after`: addresses not seen before where the
/// source lists them, else the rise in a revision's ready count.
pub fn starts(before: &Snapshot, after: &Snapshot) -> u32 {
    after
        .revisions
        .iter()
        .map(|revision| {
            let previous = before.revisions.iter().find(|r| r.name == revision.name);
            match (&revision.addresses, previous.and_then(|p| p.addresses.as_ref())) {
                (Some(now), Some(then)) => {
                    let then: BTreeSet<&String> = then.iter().collect();
                    now.iter().filter(|a| !then.contains(a)).count() as u32
                }
                (Some(now), None) if previous.is_none() => now.len() as u32,
                _ => revision.ready.saturating_sub(previous.map_or(0, |p| p.ready)),
            }
        })
        .sum()
}

/// From the first request of a cycle (`from`) to the first sample whose ready replicas reached the
/// most the autoscaler asked for during the cycle; `samples` are (time, ready, desired) of that
/// cycle. `None` when they never did, or nothing was asked for.
pub fn time_to_needed(samples: &[(Duration, u32, u32)], from: Duration) -> Option<Duration> {
    let needed = samples.iter().filter(|s| s.0 >= from).map(|s| s.2).max().filter(|&n| n > 0)?;
    samples.iter().find(|s| s.0 >= from && s.1 >= needed).map(|s| s.0 - from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::sampler::Revision;

    fn snapshot(revisions: &[(&str, u32, Option<&[&str]>)]) -> Snapshot {
        Snapshot {
            revisions: revisions
                .iter()
                .map(|(name, ready, addresses)| Revision {
                    name: (*name).into(),
                    desired: *ready,
                    ready: *ready,
                    addresses: addresses.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
                    panic: None,
                    started: Default::default(),
                })
                .collect(),
        }
    }

    #[test]
    fn phases_follow_ready_and_desired() {
        assert_eq!(classify(0, 0), Phase::AtZero);
        assert_eq!(classify(0, 3), Phase::AtZero);
        assert_eq!(classify(1, 3), Phase::Scaling);
        assert_eq!(classify(3, 3), Phase::Steady);
        assert_eq!(classify(3, 1), Phase::Steady, "scaling down still serves at full capacity");
    }

    #[test]
    fn new_addresses_are_starts_even_when_the_count_stays() {
        let before = snapshot(&[("r1", 2, Some(&["a", "b"]))]);
        let replaced = snapshot(&[("r1", 2, Some(&["a", "c"]))]);
        assert_eq!(starts(&before, &replaced), 1);
        let fresh = snapshot(&[("r1", 2, Some(&["a", "b"])), ("r2", 1, Some(&["x"]))]);
        assert_eq!(starts(&before, &fresh), 1, "a new revision's replicas are starts");
        assert_eq!(starts(&fresh, &before), 0);
    }

    #[test]
    fn without_addresses_a_rise_in_ready_counts() {
        let before = snapshot(&[("r1", 1, None)]);
        let after = snapshot(&[("r1", 4, None), ("r2", 2, None)]);
        assert_eq!(starts(&before, &after), 5);
        assert_eq!(starts(&after, &before), 0);
    }

    #[test]
    fn time_to_needed_is_from_the_first_request_to_the_peak_ask_met() {
        let ms = Duration::from_millis;
        let samples = [(ms(0), 0, 0), (ms(250), 0, 1), (ms(500), 1, 4), (ms(750), 3, 4), (ms(1000), 4, 4)];
        assert_eq!(time_to_needed(&samples, ms(100)), Some(ms(900)));
        assert_eq!(time_to_needed(&samples[..4], ms(100)), None, "never reached 4");
        assert_eq!(time_to_needed(&[(ms(0), 0, 0)], ms(0)), None, "nothing asked for");
    }
}
