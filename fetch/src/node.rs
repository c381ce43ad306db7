//! The node cache on a cluster: one process per node (`skiff-model-cache`, a DaemonSet on the
//! host network) owns a [`crate::Cache`] on the node's disk, and the model pods' init containers
//! (`skiff-fetch URI DIR --node-cache URL`) ask it for a model and copy the files it holds into
//! their own emptyDir, so model pods keep the restricted Pod Security profile (no hostPath) and a
//! second cold start on the node downloads nothing.
//!
//! - [`wire`]: the requests and answers, and the fetcher's errors as they cross the wire (each
//!   kind keeps its HTTP status, its message and its exit code).
//! - [`crate::guard`] (beside this module: the stores' clients use it too): which store endpoints
//!   the node cache refuses to reach for a caller (its own loopback and link-local addresses).
//! - [`metrics`]: what it counts (`GET /metrics`).
//! - [`server`]: the HTTP server: `POST /v1/models` lists the store with the caller's credentials
//!   on every request (a tenant never gets a model its credentials cannot read) and answers a
//!   ticket and the file list; `GET /v1/models/{key}/{path}` streams a file to that ticket's holder.
//! - [`client`]: the init container's side, which tells a store's answer (final) from a node
//!   cache that is not there (fetch directly).

pub mod client;
pub mod metrics;
pub mod server;
pub mod wire;

/// The port the node cache listens on by default, on the node's IP.
pub const DEFAULT_PORT: u16 = 8095;
