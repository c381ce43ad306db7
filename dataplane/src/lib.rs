//! Skiff's data-plane runtime, shared by `skiff up` and the cluster binaries (`skiff-router`,
//! `skiff-activator serve`, the autoscaler in `skiff-controller`):
//!
//! - [`RevisionKey`]: every registry is keyed by namespace and revision name;
//! - [`cold_start`]: when a revision's cold start begins and ends, one rule for the router and
//!   the activator;
//! - [`failing`]: a revision failing for a cause a retry will not fix, and which causes those are;
//! - [`endpoints`]: each revision's ready replicas and their in-flight slots, published by a
//!   replica backend or an EndpointSlice watch, read by the router and the activator;
//! - [`runner`]: one KPA decider per revision, fed a metric and the activator's held requests,
//!   driving a [`runner::ReplicaBackend`] (child processes, or a Deployment's `scale`);
//! - [`discovery`]: endpoints from EndpointSlices, for the cluster binaries;
//! - [`probe`]: the activator's own readiness checks of starting pods;
//! - [`readiness`]: periodic readiness probes of ready replicas (`skiff up`), as the kubelet's;
//! - [`scrape`]: replicas' in-flight gauge and request counters, the autoscaler's view of pods;
//! - [`report`]: the activator's pokes and held counts on the wire, for the cluster;
//! - [`plane`]: what a revision needs from each part present in a process, set up and torn down
//!   in one place.

pub mod cold_start;
pub mod discovery;
pub mod endpoints;
pub mod failing;
mod key;
pub mod plane;
pub mod probe;
pub mod readiness;
pub mod report;
pub mod runner;
pub mod scrape;

pub use key::RevisionKey;
pub use plane::{Holder, Plane, RevisionSpec};
pub use runner::{MetricSource, Poker, ReplicaBackend, Runner};
