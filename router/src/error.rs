//! The router's one error type.

use std::net::SocketAddr;

/// What can go wrong while configuring or starting the router.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is outside its allowed range.
    #[error("invalid router configuration: {0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why binding failed.
        source: std::io::Error,
    },
    /// The server thread could not be started.
    #[error("cannot start the router thread: {0}")]
    Thread(std::io::Error),
    /// The server stopped (or never accepted connections) before it was listening.
    #[error("the router did not start listening on {0}")]
    NotListening(SocketAddr),
}

/// The router's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
