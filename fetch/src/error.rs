//! The fetcher's errors. Each names the URI (as [`crate::uri::redact`] shows it: never a
//! credential) and the cause in words a user can act on.

use std::path::PathBuf;

/// What went wrong with a fetch.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URI cannot be read: unknown scheme, no bucket, ...
    #[error("{uri}: {message}")]
    Uri {
        /// The URI, redacted.
        uri: String,
        /// What is wrong with it.
        message: String,
    },
    /// A store setting from the environment is invalid.
    #[error("{0}")]
    Config(String),
    /// The bucket, object, repository or file does not exist.
    #[error("{uri}: not found: {cause}")]
    NotFound {
        /// The URI, redacted.
        uri: String,
        /// What the store said.
        cause: String,
    },
    /// The store refused the credentials, or gave none access.
    #[error("{uri}: access denied: {cause}")]
    Denied {
        /// The URI, redacted.
        uri: String,
        /// What the store said.
        cause: String,
    },
    /// The node cache did not connect for a caller to one of the node's own or link-local
    /// addresses: a redirect led there, or a name resolved there ([`crate::guard`]).
    #[error("{uri}: the node cache does not reach {host} for a caller (the node's own or link-local addresses)")]
    Unreachable {
        /// The URI, redacted.
        uri: String,
        /// The host (and the address it resolved to).
        host: String,
    },
    /// The transfer failed: the connection was refused or cut, the store answered an error.
    #[error("{uri}: {cause}")]
    Transfer {
        /// The URI, redacted.
        uri: String,
        /// What happened.
        cause: String,
    },
    /// The model is larger than allowed.
    #[error("{uri}: {what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The URI, redacted.
        uri: String,
        /// What was measured (the model, an archive's content, the cache's limit).
        what: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An archive is corrupt, truncated, or would write outside its folder.
    #[error("{uri}: archive {archive}: {cause}")]
    Archive {
        /// The URI, redacted.
        uri: String,
        /// The archive's name.
        archive: String,
        /// What is wrong with it.
        cause: String,
    },
    /// Writing to the local disk failed (a full disk says "No space left on device").
    #[error("{}: {source}", path.display())]
    Disk {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A phase ran past its time.
    #[error("{what} took longer than {seconds} s")]
    Timeout {
        /// The phase.
        what: String,
        /// Its limit.
        seconds: u64,
    },
}

/// The fetcher's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A disk error at `path`.
    pub fn disk(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Disk { path, source }
    }

    /// Whether trying again may succeed (a cut connection, a store that answered 5xx).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Transfer { .. } | Error::Timeout { .. })
    }

    /// The exit code `skiff-fetch` ends with, one per kind, so an init container's status tells
    /// the kind without its log.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Uri { .. } | Error::Config(_) => 2,
            Error::NotFound { .. } => 3,
            Error::Denied { .. } | Error::Unreachable { .. } => 4,
            Error::Transfer { .. } | Error::Timeout { .. } => 5,
            Error::TooLarge { .. } => 6,
            Error::Archive { .. } => 7,
            Error::Disk { .. } => 8,
        }
    }
}

/// The most of a store's or an archive's own words kept in a message.
const CAUSE_CHARS: usize = 300;

/// A cause as a store or a library gave it, made fit for a status line: an S3-style XML error
/// body becomes its `Code: Message`, control characters (an archive's garbage) become `?`, and
/// the text is cut at [`CAUSE_CHARS`].
pub fn tidy(cause: &str) -> String {
    let between = |open: &str, close: &str| {
        let start = cause.find(open)? + open.len();
        Some(&cause[start..start + cause[start..].find(close)?])
    };
    let text = match (cause.find("<?xml").or_else(|| cause.find("<Error>")), between("<Code>", "</Code>")) {
        (Some(at), Some(code)) => {
            let head = cause[..at].trim_end().trim_end_matches(':');
            match between("<Message>", "</Message>") {
                Some(message) => format!("{head}: {code}: {message}"),
                None => format!("{head}: {code}"),
            }
        }
        (Some(at), None) => cause[..at].trim_end().trim_end_matches(':').to_owned(),
        _ => cause.trim_end().trim_end_matches(':').to_owned(),
    };
    let clean: String = text.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    match clean.char_indices().nth(CAUSE_CHARS) {
        Some((cut, _)) => format!("{}…", &clean[..cut]),
        None => clean,
    }
}

#[cfg(test)]
mod tests {
    use super::tidy;

    #[test]
    fn causes_are_tidied_for_a_status_line() {
        let s3 = "Error performing GET http://h/b?list-type=2 - Server returned non-2xx status code: 404 Not Found: \
                  <?xml version=\"1.0\"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(
            tidy(s3),
            "Error performing GET http://h/b?list-type=2 - Server returned non-2xx status code: 404 Not Found: \
             NoSuchBucket: The specified bucket does not exist"
        );
        assert_eq!(tidy("404 Not Found: "), "404 Not Found");
        assert_eq!(tidy("not a number: \u{7}\u{7}"), "not a number: ??");
        assert_eq!(tidy(&"x".repeat(400)).chars().count(), 301);
    }
}
