//! Termination messages, as the kubelet reads them: each container gets a file of its own,
//! bind-mounted at its `terminationMessagePath` (`/dev/termination-log` by default) and emptied
//! before each run; when the run ends, the file's first [`MAX_MESSAGE_BYTES`] are
//! `lastState.terminated.message`, or, when it is empty, the run failed and the policy is
//! `FallbackToLogsOnError`, the log's last [`FALLBACK_LINES`] lines within [`FALLBACK_BYTES`].

/// Where a container writes its message unless it says otherwise.
pub const DEFAULT_PATH: &str = "/dev/termination-log";
/// The most of the file that is kept.
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// Lines of log taken under `FallbackToLogsOnError`.
pub const FALLBACK_LINES: usize = 80;
/// Bytes of log taken under `FallbackToLogsOnError`.
pub const FALLBACK_BYTES: usize = 2048;

/// The message of a run that wrote `file` to its termination message file and `log` to its log.
pub fn message(file: &[u8], policy: Option<&str>, failed: bool, log: &[u8]) -> Option<String> {
    let written = &file[..file.len().min(MAX_MESSAGE_BYTES)];
    if !written.is_empty() {
        return Some(String::from_utf8_lossy(written).into_owned());
    }
    if !failed || policy != Some("FallbackToLogsOnError") || log.is_empty() {
        return None;
    }
    let tail = &log[log.len().saturating_sub(FALLBACK_BYTES)..];
    let body = tail.strip_suffix(b"\n").unwrap_or(tail);
    let start =
        body.iter().enumerate().rev().filter(|(_, b)| **b == b'\n').nth(FALLBACK_LINES - 1).map_or(0, |(i, _)| i + 1);
    Some(String::from_utf8_lossy(&tail[start..]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_wins_and_is_cut() {
        assert_eq!(message(b"cannot load model", None, true, b"log"), Some("cannot load model".into()));
        let long = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        assert_eq!(message(&long, None, false, b"").unwrap().len(), MAX_MESSAGE_BYTES);
    }

    #[test]
    fn an_empty_file_falls_back_to_the_log_only_on_failure_and_when_asked() {
        let fallback = Some("FallbackToLogsOnError");
        assert_eq!(message(b"", fallback, true, b"a\nb\nError: bad\n"), Some("a\nb\nError: bad\n".into()));
        assert_eq!(message(b"", fallback, false, b"a\n"), None, "it succeeded");
        assert_eq!(message(b"", Some("File"), true, b"a\n"), None, "the default policy reads the file only");
        assert_eq!(message(b"", fallback, true, b""), None);
        let many: String = (0..100).map(|i| format!("{i}\n")).collect();
        let tail = message(b"", fallback, true, many.as_bytes()).unwrap();
        assert!(tail.starts_with("20\n") && tail.ends_with("99\n"), "the last 80 lines: {tail}");
        let wide = format!("{}\nlast\n", "y".repeat(5000));
        assert_eq!(message(b"", fallback, true, wide.as_bytes()).unwrap().len(), FALLBACK_BYTES);
    }
}
