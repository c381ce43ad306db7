//! The crate's error type.

/// What can go wrong while reconciling or running the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// The InferenceService cannot be turned into children (the status says the same).
    #[error("{0}")]
    Spec(String),
    /// The `inferenceservice-config` ConfigMap holds a value the controller cannot use.
    #[error("config map {name}, key {key}: {message}")]
    Platform {
        /// The ConfigMap.
        name: String,
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A command-line or environment setting is out of range.
    #[error("{0}")]
    Config(String),
    /// The admin HTTP listener could not start.
    #[error("admin listener on {addr}: {source}")]
    Admin {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// Leadership was lost; the process must stop reconciling.
    #[error("lost the leader lease {0}")]
    LostLease(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short label for the failures metric.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(status)) if status.code == 409 => "conflict",
            Error::Kube(_) => "kube",
            Error::Spec(_) => "spec",
            Error::Platform { .. } => "platform",
            Error::Config(_) => "config",
            Error::Admin { .. } => "admin",
            Error::LostLease(_) => "lease",
        }
    }
}
