//! What the runner fed one revision's decider and what it answered, kept for the last
//! [`KEPT`] steps: every value recorded (samples and pokes) and every decision with the ready pods
//! it was made with, at milliseconds since the decider's epoch (the revision was added, or its
//! settings changed, which starts a new decider and a new journal). A test
//! replays it through Knative's own decider and compares the answers; `skiff up` serves it at
//! `/autoscaler/journal/<namespace>/<name>`.

use std::collections::VecDeque;
use std::time::Instant;

use serde::Serialize;
use skiff_autoscaler::Decision;

/// Steps kept per revision: at one sample a second and a decision a tick, about ten minutes.
pub const KEPT: usize = 1800;

/// One step.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase", tag = "kind")]
pub enum Step {
    /// A value recorded in the decider's windows.
    Recorded {
        /// Milliseconds since the decider's epoch.
        at_ms: u64,
        /// The metric's value (pods' and activators' together).
        value: f64,
    },
    /// A decision.
    Decided {
        /// Milliseconds since the decider's epoch.
        at_ms: u64,
        /// Pods ready when it was made.
        ready: u32,
        /// Pods wanted.
        desired: u32,
        /// In panic mode.
        panic: bool,
        /// Made at once for a request waiting at zero, not at a tick.
        poke: bool,
        /// The revision had given up starting ([`Decision::activation_timed_out`]).
        activation_timed_out: bool,
    },
}

/// The bounded journal of one revision.
#[derive(Debug, Clone)]
pub struct Journal {
    epoch: Instant,
    steps: VecDeque<Step>,
}

impl Journal {
    /// An empty journal whose times count from `epoch`.
    pub fn new(epoch: Instant) -> Journal {
        Journal { epoch, steps: VecDeque::new() }
    }

    fn at_ms(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    fn push(&mut self, step: Step) {
        if self.steps.len() == KEPT {
            self.steps.pop_front();
        }
        self.steps.push_back(step);
    }

    /// `value` was recorded at `now`.
    pub fn recorded(&mut self, now: Instant, value: f64) {
        let at_ms = self.at_ms(now);
        self.push(Step::Recorded { at_ms, value });
    }

    /// `decision` was made at `now` with `ready` pods.
    pub fn decided(&mut self, now: Instant, ready: u32, decision: &Decision, poke: bool) {
        let at_ms = self.at_ms(now);
        self.push(Step::Decided {
            at_ms,
            ready,
            desired: decision.desired_pods,
            panic: decision.panic,
            poke,
            activation_timed_out: decision.activation_timed_out,
        });
    }

    /// The steps kept, oldest first.
    pub fn steps(&self) -> Vec<Step> {
        self.steps.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn steps_are_timed_from_the_epoch_and_bounded() {
        let epoch = Instant::now();
        let mut journal = Journal::new(epoch);
        journal.recorded(epoch + Duration::from_millis(1500), 16.0);
        let decision = Decision {
            desired_pods: 8,
            panic: true,
            excess_burst_capacity: -1,
            observed_stable: 16.0,
            observed_panic: 16.0,
            idle: false,
            activation_timed_out: false,
        };
        journal.decided(epoch + Duration::from_secs(2), 0, &decision, true);
        assert_eq!(
            journal.steps(),
            [
                Step::Recorded { at_ms: 1500, value: 16.0 },
                Step::Decided {
                    at_ms: 2000,
                    ready: 0,
                    desired: 8,
                    panic: true,
                    poke: true,
                    activation_timed_out: false
                }
            ]
        );
        for i in 0..KEPT {
            journal.recorded(epoch + Duration::from_secs(3 + i as u64), 1.0);
        }
        let json = serde_json::to_value(&journal.steps()[KEPT - 1]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "recorded", "atMs": 3000 + 1000 * (KEPT as u64 - 1), "value": 1.0})
        );
        let steps = journal.steps();
        assert_eq!(steps.len(), KEPT);
        assert_eq!(steps[0], Step::Recorded { at_ms: 3000, value: 1.0 }, "the oldest went first");
    }
}
