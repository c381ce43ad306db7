//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong in the node agent's library code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A call to the Kubernetes API failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// Loading a kubeconfig failed.
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file that was read.
        path: PathBuf,
        /// Why it could not be used.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A system call through `nix` failed.
    #[error("{context}: {source}")]
    Sys {
        /// What was being done.
        context: String,
        /// The errno.
        #[source]
        source: nix::Error,
    },
    /// An `ip` (or other helper) command exited unsuccessfully.
    #[error("command `{command}` failed: {stderr}")]
    Command {
        /// The command line that ran.
        command: String,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The pod address range is used up.
    #[error("no free pod IP left in {0}")]
    NoFreeIp(String),
    /// A pod's spec cannot be run by this agent (unsupported volume, missing reference, ...).
    #[error("{0}")]
    Unsupported(String),
    /// The kubelet API's certificate, key or client CA cannot be used.
    #[error("kubelet API TLS: {0}")]
    Tls(String),
    /// A kubelet API request is refused with an HTTP status (unknown pod, bad query, forbidden).
    #[error("{message}")]
    Refused {
        /// The HTTP status code of the answer.
        status: u16,
        /// Why, for the client.
        message: String,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    /// Wraps an errno with what was being done.
    pub fn sys(context: impl Into<String>, source: nix::Error) -> Self {
        Error::Sys { context: context.into(), source }
    }

    /// A kubelet API refusal with this HTTP status.
    pub fn refused(status: u16, message: impl Into<String>) -> Self {
        Error::Refused { status, message: message.into() }
    }

    /// True if this is an API error with the given HTTP status code.
    pub fn is_api_status(&self, code: u16) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s)) if s.code == code)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
