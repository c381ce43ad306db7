//! The activation timeout: how long the decider keeps the pods of a revision that is starting (none ready yet)
//! although nothing asks for them any more, before it gives up and scales it to zero. Knative's KPA reconciler
//! (`scaler.go`'s `handleScaleToZero`) takes the revision's progress deadline (the
//! `serving.knative.dev/progress-deadline` annotation, else `config-deployment`'s 600 s) plus a buffer of 30 s.
//!
//! The progress-deadline rule lives here, the one place both the autoscaler and `skiff-api` (which validates
//! InferenceServices and tells the activator how long to hold requests) read it from.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::duration::go_duration;

/// Knative's annotation (which KServe passes on from an InferenceService's metadata) for how long a revision may
/// take to become ready: a Go duration such as `600s` or `15m`.
pub const PROGRESS_DEADLINE_ANNOTATION: &str = "serving.knative.dev/progress-deadline";

/// The longest progress deadline, in seconds: two hours, time enough to bring up a GPU node and download and load
/// a large model; validation refuses more, and a label past it reads as it.
pub const MAX_PROGRESS_DEADLINE_SECS: u64 = 7200;

/// The progress deadline of a revision that sets none: Knative's `config-deployment` default.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(600);

/// What Knative adds to the progress deadline before it gives up on an activation (`scaler.go`'s
/// `activationTimeoutBuffer`), so that the revision reconciler can report why the pods failed first.
pub const ACTIVATION_TIMEOUT_BUFFER: Duration = Duration::from_secs(30);

/// The progress deadline `annotations` set ([`PROGRESS_DEADLINE_ANNOTATION`]), in whole seconds: `Ok(None)` when
/// unset; the error says what is wrong with a value that is not a duration of 1 s to
/// [`MAX_PROGRESS_DEADLINE_SECS`].
pub fn progress_deadline(annotations: &BTreeMap<String, String>) -> Result<Option<Duration>, String> {
    let Some(text) = annotations.get(PROGRESS_DEADLINE_ANNOTATION) else { return Ok(None) };
    let max = Duration::from_secs(MAX_PROGRESS_DEADLINE_SECS);
    match go_duration(text.trim()) {
        Some(d) if d >= Duration::from_secs(1) && d <= max => Ok(Some(Duration::from_secs(d.as_secs()))),
        Some(_) => Err(format!("must be between 1s and {MAX_PROGRESS_DEADLINE_SECS}s, got {text:?}")),
        None => Err(format!("must be a duration such as 600s or 15m, got {text:?}")),
    }
}

/// How long a revision may stay activating while it wants no pod: its progress deadline (else
/// [`DEFAULT_PROGRESS_DEADLINE`]) plus [`ACTIVATION_TIMEOUT_BUFFER`].
pub fn activation_timeout(progress_deadline: Option<Duration>) -> Duration {
    progress_deadline.unwrap_or(DEFAULT_PROGRESS_DEADLINE) + ACTIVATION_TIMEOUT_BUFFER
}

/// What a revision that gave up starting tells its user (the runner's log line, `skiff up`'s event and
/// `skiff get`), given its progress deadline: no replica became ready in time while no request waited, so it is
/// at zero until the next request.
pub fn timed_out_message(progress_deadline: Option<Duration>) -> String {
    format!(
        "no replica became ready within the progress deadline ({}s, {PROGRESS_DEADLINE_ANNOTATION}) plus {}s while \
         no request waited: scaled to zero; the next request starts it again",
        progress_deadline.unwrap_or(DEFAULT_PROGRESS_DEADLINE).as_secs(),
        ACTIVATION_TIMEOUT_BUFFER.as_secs()
    )
}

/// The reason Knative's revision gives when it never reached its initial scale within the progress deadline,
/// which `skiff up` uses for a revision whose activation timed out.
pub const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(PROGRESS_DEADLINE_ANNOTATION.to_owned(), value.to_owned())])
    }

    #[test]
    fn the_timeout_is_the_deadline_or_knatives_default_plus_the_buffer() {
        assert_eq!(progress_deadline(&BTreeMap::new()), Ok(None));
        assert_eq!(activation_timeout(None), Duration::from_secs(630));
        let deadline = progress_deadline(&annotations("2m")).unwrap();
        assert_eq!(deadline, Some(Duration::from_secs(120)));
        assert_eq!(activation_timeout(deadline), Duration::from_secs(150));
        assert_eq!(progress_deadline(&annotations("0s")), Err("must be between 1s and 7200s, got \"0s\"".to_owned()));
    }
}
