//! Restart decisions (pure): restart policies and the crash-loop back-off.

use std::time::Duration;

/// A pod's (or a sidecar's) restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Restart whenever the container exits.
    Always,
    /// Restart when it exits with a non-zero code.
    OnFailure,
    /// Never restart.
    Never,
}

impl RestartPolicy {
    /// Parses the API string; unset means `Always`, as the API defaults it.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        }
    }

    /// Whether a container that exited with `exit_code` is started again.
    pub fn should_restart(self, exit_code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }

    /// The policy of an init container: they are retried on failure unless the pod's policy is
    /// `Never`, and never rerun after success.
    pub fn for_init(self) -> Self {
        match self {
            RestartPolicy::Never => RestartPolicy::Never,
            _ => RestartPolicy::OnFailure,
        }
    }
}

/// The exit code the API reports for a process: its code, or 128 + the signal that killed it.
pub fn exit_code(code: Option<i32>, signal: Option<i32>) -> i32 {
    match (code, signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 255,
    }
}

/// The `terminated.reason` for an exit code (the kubelet's `Completed` / `Error`).
pub fn terminated_reason(exit_code: i32) -> &'static str {
    if exit_code == 0 { "Completed" } else { "Error" }
}

/// Exponential back-off between restarts: `initial`, doubled each time up to `max`, back to
/// `initial` once a run lasted at least `reset_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    reset_after: Duration,
    last: Option<Duration>,
}

impl Backoff {
    /// A back-off with the given bounds.
    pub fn new(initial: Duration, max: Duration, reset_after: Duration) -> Self {
        Backoff { initial, max: max.max(initial), reset_after, last: None }
    }

    /// The wait before the next start, given how long the last run lasted.
    pub fn next_delay(&mut self, ran_for: Duration) -> Duration {
        let delay = match self.last {
            Some(prev) if ran_for < self.reset_after => (prev * 2).min(self.max),
            _ => self.initial,
        };
        self.last = Some(delay);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies() {
        use RestartPolicy::*;
        assert_eq!(RestartPolicy::parse(None), Always);
        assert_eq!(RestartPolicy::parse(Some("OnFailure")), OnFailure);
        assert_eq!(RestartPolicy::parse(Some("Never")), Never);
        assert!(Always.should_restart(0) && Always.should_restart(1));
        assert!(!OnFailure.should_restart(0) && OnFailure.should_restart(137));
        assert!(!Never.should_restart(1));
        assert_eq!(Always.for_init(), OnFailure);
        assert_eq!(Never.for_init(), Never);
    }

    #[test]
    fn exit_codes_and_reasons() {
        assert_eq!(exit_code(Some(3), None), 3);
        assert_eq!(exit_code(None, Some(9)), 137);
        assert_eq!(exit_code(None, Some(15)), 143);
        assert_eq!(terminated_reason(0), "Completed");
        assert_eq!(terminated_reason(143), "Error");
    }

    #[test]
    fn backoff_doubles_caps_and_resets() {
        let s = Duration::from_secs;
        let mut b = Backoff::new(s(1), s(5), s(60));
        assert_eq!(b.next_delay(s(0)), s(1));
        assert_eq!(b.next_delay(s(0)), s(2));
        assert_eq!(b.next_delay(s(0)), s(4));
        assert_eq!(b.next_delay(s(0)), s(5));
        assert_eq!(b.next_delay(s(0)), s(5));
        assert_eq!(b.next_delay(s(60)), s(1), "a long run resets the back-off");
        assert_eq!(b.next_delay(s(1)), s(2));
    }
}
