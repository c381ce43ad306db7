//! Skiff's node agent: a kubelet stand-in for the local test cluster (`tests/cluster`).
//!
//! It registers a Node, watches the pods the scheduler binds to it, and runs each container's
//! program as a local process: every pod gets a network namespace with its own IP on a host
//! bridge (`skiff0`, 10.244.0.0/24), volumes are bind-mounted in a private mount namespace,
//! probes drive readiness and restarts, and pod status goes to the API as the kubelet writes it
//! (with each run's termination message), so the real controllers (EndpointSlices, Deployments)
//! work unchanged. Images map to local programs through an image map file ([`skiff_api::image`],
//! shared with `skiff up`).
//!
//! The kubelet API's log endpoint (HTTPS on :10250, client certificates, SubjectAccessReview)
//! serves each container's log file, so `kubectl logs [-f]` works.
//!
//! Layout: pure decisions in [`mod@env`], [`probe`], [`restart`], [`status`], [`ipam`],
//! [`volumes`], [`logquery`], [`termination`]; the I/O shell in [`agent`], [`pod`], [`container`],
//! [`probe_run`], [`process`], [`net`], [`hostport`], [`node`], [`sandbox`], [`apiproxy`], [`kubelet_api`],
//! [`kubelet_tls`], [`logfiles`].

pub mod agent;
pub mod apiproxy;
pub mod config;
pub mod container;
pub mod env;
pub mod error;
pub mod hostport;
pub mod ipam;
pub mod kubelet_api;
pub mod kubelet_tls;
pub mod logfiles;
pub mod logquery;
pub mod net;
pub mod node;
pub mod pod;
pub mod probe;
pub mod probe_run;
pub mod process;
pub mod restart;
pub mod sandbox;
pub mod shared;
pub mod status;
pub mod termination;
pub mod volumes;

pub use config::{Cli, Command, Config};
pub use error::{Error, Result};
