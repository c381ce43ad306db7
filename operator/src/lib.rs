//! Skiff's Kubernetes operator (`skiff-controller`): each change of an InferenceService's predictor
//! makes a new immutable revision `<name>-predictor-NNNNN` (a Deployment running `skiff-server` on
//! the model, or the user's container, and a Service), owned by the InferenceService; the previous
//! rolled-out revision is kept while `canaryTrafficPercent` is set, older ones are collected; the
//! status carries KServe's conditions, URL and traffic split.
//!
//! Pure cores with a thin I/O shell: [`plan`] decides everything from what the cluster shows
//! ([`revisions`] reads the bookkeeping back from labels and annotations, [`desired`] builds the
//! children, [`status`] the status, [`scalers`] the HPAs and KEDA ScaledObjects of the `hpa` and `keda`
//! autoscaler classes, [`platform`] reads the `inferenceservice-config` ConfigMap,
//! [`leader`] decides on the Lease, [`credentials`] gives the storage initializer the store
//! credentials of the pod's ServiceAccount); [`controller`] does the reads and writes ([`freshness`] skips
//! stale cached copies, [`backoff`] spaces the retries of failed ones), [`metrics`]
//! and [`admin`] make it observable (its logs: `skiff_http::telemetry`).

pub mod admin;
pub mod autoscaler;
pub mod backoff;
pub mod config;
pub mod controller;
pub mod credentials;
pub mod desired;
pub mod error;
#[cfg(test)]
mod fixtures;
pub mod freshness;
pub mod hash;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod platform;
pub mod revisions;
pub mod scalers;
pub mod status;
pub mod storage;

pub use config::Settings;
pub use error::{Error, Result};
