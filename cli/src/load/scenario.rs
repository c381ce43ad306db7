//! What one cycle of `skiff load` sends, as a pure function of time since the cycle began:
//! closed-loop concurrency (constant, steps or a linear ramp), a burst of N at once, or open-loop
//! arrivals at a fixed rate (sent on schedule whatever the responses do).

use std::time::Duration;

use super::flags::Stage;

/// One cycle's shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Scenario {
    /// Closed loop: each of `concurrency_at(t)` workers sends its next request when the last answered.
    Closed(Closed),
    /// N requests at once; the cycle ends when they have answered and the replicas have settled.
    Burst(usize),
    /// Open loop: request `i` is due at `i / rate` seconds, for `duration`.
    Rate {
        /// Requests per second.
        rate: f64,
        /// How long.
        duration: Duration,
    },
}

/// How concurrency moves from one stage to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Jump to each stage's concurrency at its start.
    Step,
    /// Move linearly from the previous stage's concurrency (0 before the first) to this one's.
    Ramp,
}

/// A closed-loop schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    /// Steps or ramps.
    pub shape: Shape,
    /// The stages, in order.
    pub stages: Vec<Stage>,
}

impl Closed {
    /// The whole schedule's length.
    pub fn total(&self) -> Duration {
        self.stages.iter().map(|s| s.duration).sum()
    }

    /// The most workers it ever asks for.
    pub fn peak(&self) -> usize {
        self.stages.iter().map(|s| s.concurrency).max().unwrap_or(0)
    }

    /// Workers wanted at `t` since the cycle began; 0 once it is over.
    pub fn concurrency_at(&self, t: Duration) -> usize {
        let mut start = Duration::ZERO;
        let mut previous = 0;
        for stage in &self.stages {
            let end = start + stage.duration;
            if t < end {
                return match self.shape {
                    Shape::Step => stage.concurrency,
                    Shape::Ramp => {
                        let fraction = (t - start).as_secs_f64() / stage.duration.as_secs_f64();
                        let from = previous as f64;
                        (from + (stage.concurrency as f64 - from) * fraction).round() as usize
                    }
                };
            }
            previous = stage.concurrency;
            start = end;
        }
        0
    }
}

impl Scenario {
    /// A one-line description for the summary.
    pub fn describe(&self) -> String {
        let stages = |stages: &[Stage]| -> String {
            let parts: Vec<String> =
                stages.iter().map(|s| format!("{}:{}", s.concurrency, super::table::secs(s.duration))).collect();
            parts.join(",")
        };
        match self {
            Scenario::Closed(Closed { shape: Shape::Step, stages: s }) if s.len() == 1 => {
                format!("{} concurrent for {}", s[0].concurrency, super::table::secs(s[0].duration))
            }
            Scenario::Closed(Closed { shape: Shape::Step, stages: s }) => format!("steps {}", stages(s)),
            Scenario::Closed(Closed { shape: Shape::Ramp, stages: s }) => format!("ramp {}", stages(s)),
            Scenario::Burst(n) => format!("burst of {n}"),
            Scenario::Rate { rate, duration } => format!("{rate}/s for {}", super::table::secs(*duration)),
        }
    }
}

/// When request `i` of an open-loop cycle is due.
pub fn arrival(i: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(i as f64 / rate)
}

/// How many requests an open-loop cycle sends: those due before `duration` ends.
pub fn arrivals(rate: f64, duration: Duration) -> u64 {
    let exact = rate * duration.as_secs_f64();
    let n = exact.ceil() as u64;
    // Due times are i / rate for i in 0..n: the last is strictly before the end.
    if n > 0 && arrival(n - 1, rate) >= duration { n - 1 } else { n }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn stage(concurrency: usize, s: u64) -> Stage {
        Stage { concurrency, duration: secs(s) }
    }

    #[test]
    fn steps_hold_each_stage_then_stop() {
        let steps = Closed { shape: Shape::Step, stages: vec![stage(5, 10), stage(20, 5)] };
        assert_eq!(steps.total(), secs(15));
        assert_eq!(steps.peak(), 20);
        assert_eq!(steps.concurrency_at(Duration::ZERO), 5);
        assert_eq!(steps.concurrency_at(Duration::from_millis(9999)), 5);
        assert_eq!(steps.concurrency_at(secs(10)), 20);
        assert_eq!(steps.concurrency_at(secs(15)), 0);
    }

    #[test]
    fn a_ramp_moves_linearly_from_the_previous_stage() {
        let ramp = Closed { shape: Shape::Ramp, stages: vec![stage(10, 10), stage(10, 5), stage(0, 10)] };
        assert_eq!(ramp.concurrency_at(Duration::ZERO), 0);
        assert_eq!(ramp.concurrency_at(secs(5)), 5);
        assert_eq!(ramp.concurrency_at(secs(12)), 10);
        assert_eq!(ramp.concurrency_at(secs(20)), 5);
        assert_eq!(ramp.concurrency_at(secs(25)), 0);
    }

    #[test]
    fn open_loop_arrivals_are_evenly_spaced_and_end_before_the_duration() {
        assert_eq!(arrival(0, 200.0), Duration::ZERO);
        assert_eq!(arrival(3, 200.0), Duration::from_millis(15));
        assert_eq!(arrivals(200.0, secs(5)), 1000);
        assert_eq!(arrivals(3.0, Duration::from_millis(1001)), 4);
        assert_eq!(arrivals(0.5, secs(1)), 1);
    }

    #[test]
    fn scenarios_describe_themselves() {
        assert_eq!(Scenario::Burst(20).describe(), "burst of 20");
        let constant = Scenario::Closed(Closed { shape: Shape::Step, stages: vec![stage(10, 10)] });
        assert_eq!(constant.describe(), "10 concurrent for 10s");
        assert_eq!(Scenario::Rate { rate: 200.0, duration: secs(5) }.describe(), "200/s for 5s");
    }
}
