//! The crate's error type. It names no domain type (its fields are strings), so that every module
//! can use it without importing the others.

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
    /// A manifest of another kind (a ServingRuntime, a ClusterServingRuntime) is not valid YAML of that kind.
    #[error("not a valid {kind} manifest: {message}")]
    ParseManifest {
        /// The kind that was expected.
        kind: &'static str,
        /// What the parser said.
        message: String,
    },
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
    /// `spec.predictor.model.runtime` names a runtime that is neither a ServingRuntime in the
    /// InferenceService's namespace nor a ClusterServingRuntime ([`crate::runtime::select_runtime`]).
    #[error(
        "spec.predictor.model.runtime: no ServingRuntime in the namespace and no ClusterServingRuntime is named {name:?}"
    )]
    RuntimeNotFound {
        /// The name the InferenceService gave.
        name: String,
    },
    /// The runtime named by `spec.predictor.model.runtime` has `spec.disabled: true`.
    #[error("spec.predictor.model.runtime: {kind} {name:?} is disabled")]
    RuntimeDisabled {
        /// The runtime's name.
        name: String,
        /// Which of the two kinds it is (`ServingRuntime` or `ClusterServingRuntime`).
        kind: &'static str,
    },
    /// The runtime named by `spec.predictor.model.runtime` does not list the protocol that
    /// `spec.predictor.model.protocolVersion` asks for.
    #[error(
        "spec.predictor.model.protocolVersion: {kind} {name:?} does not support protocol {protocol} (it supports {})",
        supported.join(", ")
    )]
    RuntimeProtocolUnsupported {
        /// The runtime's name.
        name: String,
        /// Which of the two kinds it is (`ServingRuntime` or `ClusterServingRuntime`).
        kind: &'static str,
        /// The protocol the model asks for.
        protocol: String,
        /// The runtime's `protocolVersions`.
        supported: Vec<String>,
    },
    /// The runtime named by `spec.predictor.model.runtime` lists no `supportedModelFormats` entry
    /// for the model's format (and version, when the model gives one).
    #[error("spec.predictor.model.modelFormat: {kind} {name:?} does not support model format {format}")]
    RuntimeFormatUnsupported {
        /// The runtime's name.
        name: String,
        /// Which of the two kinds it is (`ServingRuntime` or `ClusterServingRuntime`).
        kind: &'static str,
        /// The model's format, as `sklearn` or `sklearn version 1.5`.
        format: String,
    },
    /// No `runtime:` is named and no enabled, single-model ServingRuntime or ClusterServingRuntime
    /// supports the model's format with `autoSelect: true` and the model's protocol.
    #[error(
        "spec.predictor.model.modelFormat: no ServingRuntime or ClusterServingRuntime supports model format {format} \
         with autoSelect and protocol {protocol}; create one, or name one with spec.predictor.model.runtime"
    )]
    NoSupportingRuntime {
        /// The model's format, as `sklearn` or `sklearn version 1.5`.
        format: String,
        /// The model's protocol (`v1` when it names none).
        protocol: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
        Error::Invalid { field: field.into(), message: message.into() }
    }

    /// KServe's reason for a runtime selection error (its `FailureInfo.reason` in
    /// `status.modelStatus.lastFailureInfo`): `RuntimeNotRecognized`, `RuntimeDisabled` or
    /// `NoSupportingRuntime`, for the condition the operator writes; `None` for other errors.
    pub fn runtime_reason(&self) -> Option<&'static str> {
        match self {
            Error::RuntimeNotFound { .. } => Some("RuntimeNotRecognized"),
            Error::RuntimeDisabled { .. } => Some("RuntimeDisabled"),
            Error::RuntimeProtocolUnsupported { .. }
            | Error::RuntimeFormatUnsupported { .. }
            | Error::NoSupportingRuntime { .. } => Some("NoSupportingRuntime"),
            _ => None,
        }
    }
}
