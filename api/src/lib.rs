//! Skiff's shared vocabulary. KServe `InferenceService` v1beta1 types ([`isvc`]) that keep every
//! field a user wrote, the names KServe gives its fields, which tell a misspelt one ([`fields`]),
//! their validation with errors naming the field ([`validate`]), revisions
//! ([`revision`]) and their rollout and canary traffic split ([`traffic`]), the bridge to the
//! autoscaler's per-revision settings ([`scaling`]) and KServe's autoscaler classes and deployment
//! modes ([`autoscaling`]), and what `skiff up` and the operator must
//! agree on about a revision's pods ([`serving`]), how a container image runs as a local
//! program without a container runtime (`skiff up`, [`image`]), and KServe's
//! ServingRuntimes and ClusterServingRuntimes with the rule that picks one for a model that
//! `skiff-server` does not serve ([`runtime`]).
//!
//! For Kubernetes the same types generate the CustomResourceDefinition ([`resource`], [`schema`],
//! [`status`]; the `crdgen` binary prints it) and name the labels of the objects the operator
//! creates ([`labels`]). What the control plane tells the data plane about a revision through those
//! labels and annotations is written and read in one place ([`settings`]).

pub mod autoscaling;
pub mod error;
pub mod example;
pub mod fields;
pub mod graph;
pub mod image;
pub mod isvc;
pub mod labels;
pub mod limits;
pub mod resource;
pub mod revision;
pub mod runtime;
pub mod scaling;
pub mod schema;
pub mod serving;
pub mod settings;
pub mod shorthand;
pub mod status;
pub mod storage;
pub mod traffic;
pub mod validate;

pub use error::{Error, Result};
pub use isvc::InferenceService;
pub use resource::InferenceServiceResource;
pub use status::InferenceServiceStatus;
