//! Skiff's shared vocabulary. KServe `InferenceService` v1beta1 types ([`isvc`]) that keep every
//! field a user wrote, their validation with errors naming the field ([`validate`]), revisions
//! ([`revision`]) and their rollout and canary traffic split ([`traffic`]), the bridge to the
//! autoscaler's per-revision settings ([`scaling`]), and the in-process registry of ready replicas
//! that the router, activator and replica backends share ([`endpoints`]).

pub mod endpoints;
pub mod error;
pub mod isvc;
pub mod revision;
pub mod scaling;
pub mod traffic;
pub mod validate;

pub use error::{Error, Result};
pub use isvc::InferenceService;
