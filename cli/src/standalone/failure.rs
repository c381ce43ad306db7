//! Why a replica failed, in KServe's terms (`lastFailureInfo`): `ModelLoadFailed` for a replica
//! that never became ready (its model was refused before it started, or did not load), `Error`
//! for one that failed after serving. The message is what the replica left, in the order the
//! kubelet reads it with `terminationMessagePolicy: FallbackToLogsOnError`: its termination
//! message, else the end of its log, else how it exited.

use std::process::ExitStatus;

use super::status::FailureInfo;

/// A replica that never became ready.
pub const MODEL_LOAD_FAILED: &str = "ModelLoadFailed";
/// A replica that failed after it was ready (Kubernetes' reason for a container that exited non-zero).
pub const ERROR: &str = "Error";
/// The most of a log's end taken as the message (the kubelet's fallback takes 2048 bytes).
pub const LOG_TAIL_BYTES: usize = 2048;

/// A model refused before a replica started (`message` says why).
pub fn refused(message: String) -> FailureInfo {
    FailureInfo { reason: MODEL_LOAD_FAILED.into(), message, exit_code: None }
}

/// How a replica ended and what it left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exit {
    /// Whether it had been ready.
    pub was_ready: bool,
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Its termination message file's content.
    pub termination_message: Option<String>,
    /// The last lines of its log.
    pub log_tail: Vec<String>,
}

impl Exit {
    /// From the front process's exit status.
    pub fn of(status: Option<ExitStatus>) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        Exit { code: status.and_then(|s| s.code()), signal: status.and_then(|s| s.signal()), ..Exit::default() }
    }
}

/// The failure of a replica that ended as `exit` says.
pub fn exited(exit: &Exit) -> FailureInfo {
    let reason = if exit.was_ready { ERROR } else { MODEL_LOAD_FAILED };
    let termination = exit.termination_message.as_deref().map(str::trim).filter(|m| !m.is_empty());
    let message = match (termination, exit.log_tail.is_empty(), exit.code, exit.signal) {
        (Some(message), ..) => message.to_owned(),
        (None, false, ..) => exit.log_tail.join("\n"),
        (None, true, Some(code), _) => format!("the replica exited with code {code}"),
        (None, true, None, Some(signal)) => format!("the replica was killed by signal {signal}"),
        (None, true, None, None) => "the replica exited".to_owned(),
    };
    FailureInfo { reason: reason.into(), message: skiff_server::termination::message(&message), exit_code: exit.code }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_termination_message_comes_first_then_the_log_then_the_exit() {
        let mut exit = Exit {
            code: Some(1),
            termination_message: Some("cannot load model 'iris': bad\n".into()),
            log_tail: vec!["line 1".into(), "Error: bad".into()],
            ..Exit::default()
        };
        assert_eq!(
            exited(&exit),
            FailureInfo {
                reason: "ModelLoadFailed".into(),
                message: "cannot load model 'iris': bad".into(),
                exit_code: Some(1)
            }
        );
        exit.termination_message = Some("  ".into());
        assert_eq!(exited(&exit).message, "line 1\nError: bad");
        exit.log_tail.clear();
        assert_eq!(exited(&exit).message, "the replica exited with code 1");
        let killed = Exit { was_ready: true, signal: Some(9), ..Exit::default() };
        let failure = exited(&killed);
        assert_eq!(
            (failure.reason.as_str(), failure.message.as_str()),
            ("Error", "the replica was killed by signal 9")
        );
        assert_eq!(failure.exit_code, None);
    }

    #[test]
    fn exit_statuses_read_as_code_or_signal() {
        use std::os::unix::process::ExitStatusExt;
        let coded = Exit::of(Some(ExitStatus::from_raw(3 << 8)));
        assert_eq!((coded.code, coded.signal), (Some(3), None));
        let signalled = Exit::of(Some(ExitStatus::from_raw(9)));
        assert_eq!((signalled.code, signalled.signal), (None, Some(9)));
        assert_eq!(refused("empty".into()).reason, "ModelLoadFailed");
    }
}
