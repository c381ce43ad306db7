//! The crate's one error type, and the HTTP status each error maps to.

use http::StatusCode;

/// Everything that can go wrong in the model server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed or does not fit the model (400).
    #[error("{0}")]
    InvalidRequest(String),
    /// No model has this name (404).
    #[error("model '{0}' not found")]
    ModelNotFound(String),
    /// The model has no such version (404): each model has one, `has`.
    #[error("model '{model}' has no version '{version}' (it has version {has})")]
    VersionNotFound {
        /// Model name.
        model: String,
        /// The version asked for.
        version: String,
        /// The version the model has.
        has: &'static str,
    },
    /// The request asks for what the server does not do, such as loading a model (400;
    /// FAILED_PRECONDITION over gRPC).
    #[error("{0}")]
    Unsupported(String),
    /// No route matches the path (404).
    #[error("no route for {method} {path}")]
    NoRoute {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// The route exists but not for this method (405).
    #[error("method {method} is not allowed on {path}")]
    MethodNotAllowed {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// The request body is too large (413), too slow (408), over the memory budget (503) or broken (400).
    #[error(transparent)]
    Body(#[from] skiff_http::body::BodyError),
    /// The model is still loading, or the server is draining (503).
    #[error("model '{0}' is not ready")]
    ModelNotReady(String),
    /// Every slot and queue place is taken (503).
    #[error("server overloaded: {0}")]
    Overloaded(String),
    /// ONNX Runtime failed while running a model (500).
    #[error("inference failed: {0}")]
    Inference(String),
    /// A model could not be found on disk or loaded.
    #[error("cannot load model '{name}' from {path}: {reason}")]
    ModelLoad {
        /// Model name.
        name: String,
        /// Where it was read from.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// The command line or environment is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Socket or file I/O failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl From<Error> for tonic::Status {
    fn from(error: Error) -> tonic::Status {
        tonic::Status::new(error.grpc_code(), error.to_string())
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl skiff_http::HttpError for Error {
    fn status(&self) -> StatusCode {
        match self {
            Error::InvalidRequest(_) | Error::Unsupported(_) => StatusCode::BAD_REQUEST,
            Error::ModelNotFound(_) | Error::VersionNotFound { .. } | Error::NoRoute { .. } => StatusCode::NOT_FOUND,
            Error::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Error::Body(e) => e.status(),
            Error::ModelNotReady(_) | Error::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Inference(_) | Error::ModelLoad { .. } | Error::Config(_) | Error::Io(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    fn retry_after(&self) -> bool {
        match self {
            Error::Overloaded(_) => true,
            Error::Body(e) => e.retry_after(),
            _ => false,
        }
    }

    /// A model that is loading, or a server that is draining, is a state: the readiness probes
    /// of every replica start hear it until the model is loaded.
    fn is_failure(&self) -> bool {
        !matches!(self, Error::ModelNotReady(_)) && self.status().is_server_error()
    }
}

impl Error {
    /// The gRPC status code, derived from the HTTP status so that both protocols answer one error
    /// alike: [`Error::Unsupported`] → FAILED_PRECONDITION, any other 400 → INVALID_ARGUMENT,
    /// 404 → NOT_FOUND, 405 → UNIMPLEMENTED, 408 → DEADLINE_EXCEEDED, 413 and a 503 worth retrying
    /// (overload, memory budget) → RESOURCE_EXHAUSTED, any other 503 → UNAVAILABLE, the rest →
    /// INTERNAL.
    pub fn grpc_code(&self) -> tonic::Code {
        use skiff_http::HttpError;
        if let Error::Unsupported(_) = self {
            return tonic::Code::FailedPrecondition;
        }
        match self.status() {
            StatusCode::BAD_REQUEST => tonic::Code::InvalidArgument,
            StatusCode::NOT_FOUND => tonic::Code::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => tonic::Code::Unimplemented,
            StatusCode::REQUEST_TIMEOUT => tonic::Code::DeadlineExceeded,
            StatusCode::PAYLOAD_TOO_LARGE => tonic::Code::ResourceExhausted,
            StatusCode::SERVICE_UNAVAILABLE if self.retry_after() => tonic::Code::ResourceExhausted,
            StatusCode::SERVICE_UNAVAILABLE => tonic::Code::Unavailable,
            _ => tonic::Code::Internal,
        }
    }

    /// Shorthand for [`Error::InvalidRequest`].
    pub fn invalid(message: impl Into<String>) -> Error {
        Error::InvalidRequest(message.into())
    }
}

#[cfg(test)]
mod tests {
    use skiff_http::HttpError;

    use super::*;

    #[test]
    fn a_model_still_loading_is_a_state_not_a_failure() {
        assert_eq!(Error::ModelNotReady("iris".into()).status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(!Error::ModelNotReady("iris".into()).is_failure());
        assert!(Error::Inference("bad".into()).is_failure());
        assert!(Error::Overloaded("queue full".into()).is_failure());
        assert!(!Error::invalid("shape").is_failure());
    }
}
