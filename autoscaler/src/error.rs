//! The crate's one error type.

/// Everything that can be wrong with autoscaling settings.
///
/// `key` names where the value came from: a `config-autoscaler` key (`stable-window`), a revision annotation
/// (`autoscaling.knative.dev/window`) or an InferenceService field (`minReplicas`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The value is not of the expected kind (a number, a duration, a boolean, one of a set of words).
    #[error("{key}: cannot parse {value:?} as {expected}")]
    Parse {
        /// Setting, annotation or field.
        key: String,
        /// The value as written.
        value: String,
        /// What was expected, e.g. "a duration such as 60s or 1m30s".
        expected: &'static str,
    },
    /// The value parsed but lies outside its allowed range.
    #[error("{key} = {value}: {allowed}")]
    OutOfRange {
        /// Setting, annotation or field.
        key: String,
        /// The value as written.
        value: String,
        /// The allowed range, e.g. "must be between 6s and 1h".
        allowed: String,
    },
    /// Two settings contradict each other.
    #[error("{key}: {message}")]
    Conflict {
        /// The setting, annotation or field that is rejected.
        key: String,
        /// What it contradicts, naming the other setting.
        message: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn parse(key: &str, value: &str, expected: &'static str) -> Self {
        Self::Parse { key: key.to_owned(), value: value.to_owned(), expected }
    }

    pub(crate) fn range(key: &str, value: impl ToString, allowed: impl Into<String>) -> Self {
        Self::OutOfRange { key: key.to_owned(), value: value.to_string(), allowed: allowed.into() }
    }

    pub(crate) fn conflict(key: &str, message: impl Into<String>) -> Self {
        Self::Conflict { key: key.to_owned(), message: message.into() }
    }

    /// The setting, annotation or field the error is about.
    pub fn key(&self) -> &str {
        match self {
            Self::Parse { key, .. } | Self::OutOfRange { key, .. } | Self::Conflict { key, .. } => key,
        }
    }

    /// What is wrong, without [`Error::key`] in front: for a caller that names the field itself.
    pub fn reason(&self) -> String {
        match self {
            Self::Parse { value, expected, .. } => format!("cannot parse {value:?} as {expected}"),
            Self::OutOfRange { value, allowed, .. } => format!("{value}: {allowed}"),
            Self::Conflict { message, .. } => message.clone(),
        }
    }
}
