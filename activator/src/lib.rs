//! `skiff-activator`: holds requests for revisions that have no (or too little) ready capacity,
//! pokes the autoscaler when a revision is at zero, and forwards each request as soon as a replica
//! has a free slot, honouring `containerConcurrency` (Knative's activator, without Knative). The
//! same crate is the queue-proxy sidecar for custom containers ([`queue_proxy`]).
//!
//! Layout: pure cores ([`load`] counting, header rules in [`forward`], settings and their
//! validation) under a thin I/O shell ([`dispatch`] for one request's way to a replica; sockets and
//! drain are `skiff-http`'s). Errors become HTTP answers in one place, [`response::error`].

pub mod activator;
pub mod body;
pub mod cli;
pub mod cluster;
pub mod cold_start;
pub mod dispatch;
pub mod error;
pub mod forward;
pub mod load;
pub mod queue_proxy;
pub mod response;

pub use activator::{Activator, Limits, RevisionConfig, RevisionStats};
pub use error::{Error, Result};
pub use queue_proxy::{QueueProxy, QueueProxyConfig};
pub use skiff_dataplane::Poker;

pub use skiff_api::serving::REVISION_HEADER;
