//! The crate's error type.

/// What can be wrong with an InferenceService or its manifest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A field has a value Skiff does not accept; `field` is its path, e.g. `spec.predictor.minReplicas`.
    #[error("{field}: {message}")]
    Invalid {
        /// Path of the offending field.
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// An InferenceService has taken every revision number ([`crate::revision::MAX_REVISION`]).
    #[error(
        "{service}: every revision number up to {max} is taken; delete and re-create the InferenceService \
         to number its revisions from 1 again"
    )]
    RevisionsExhausted {
        /// The InferenceService.
        service: String,
        /// The highest revision number.
        max: u32,
    },
    /// The manifest is not a YAML InferenceService.
    #[error("not a valid InferenceService manifest: {0}")]
    Parse(String),
    /// An image map file cannot be read or parsed ([`crate::image`]).
    #[error("image map {path}: {message}")]
    ImageMap {
        /// The file that was read.
        path: std::path::PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A value could not be written as YAML (the generated CRD).
    #[error("cannot write YAML: {0}")]
    Yaml(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid { field: field.into(), message: message.into() }
    }
}
