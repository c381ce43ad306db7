//! The termination message: why the server stopped, written where Kubernetes reads it
//! (`terminationMessagePath`, `/dev/termination-log` by default) and where `skiff up` reads it, so
//! that a model that fails to load says why in the revision's status rather than only in the log.

use std::path::Path;

/// Kubernetes keeps at most 4096 bytes of a container's termination message.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// The message for `error`: its text, cut to [`MAX_MESSAGE_BYTES`] at a character boundary.
pub fn message(error: &dyn std::fmt::Display) -> String {
    let mut text = error.to_string();
    if text.len() > MAX_MESSAGE_BYTES {
        let cut = (0..=MAX_MESSAGE_BYTES).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        text.truncate(cut);
    }
    text
}

/// Writes the message for `error` to `path`, replacing what it held.
pub fn write(path: &Path, error: &dyn std::fmt::Display) -> std::io::Result<()> {
    std::fs::write(path, message(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(message(&"short"), "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = message(&long);
        assert_eq!(cut.len(), MAX_MESSAGE_BYTES);
        assert!(cut.chars().all(|c| c == 'é'));
        let odd = format!("x{long}");
        assert_eq!(message(&odd).len(), MAX_MESSAGE_BYTES - 1);
    }

    #[test]
    fn writes_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("termination-log");
        std::fs::write(&path, "older").unwrap();
        write(&path, &"cannot load model").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "cannot load model");
    }
}
