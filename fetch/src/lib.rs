//! Skiff's model fetcher, used by both modes: `skiff up` fetches a model before its replicas
//! start, and the cluster's model pods run it as their init container (`skiff-fetch`).
//!
//! - [`uri`]: which store a `storageUri` names (`s3://`, `gs://`, `https://`, `hf://`), and how it
//!   is shown without the credentials a URL may carry.
//! - [`env`]: the store settings, from KServe's storage-initializer variables.
//! - [`remote`]: a store as a list of versioned objects and ranged reads ([`remote::Remote`]),
//!   over `object_store` (S3, GCS), plain HTTP and the Hugging Face Hub's layout.
//! - [`download`]: objects downloaded in parallel ranges straight to disk, retried, bounded.
//! - [`archive`]: a single `.tar`, `.tar.gz`, `.tgz` or `.zip` unpacked as KServe does, never
//!   writing or reading outside its folder (every path resolved through [`beneath`]), bounded.
//! - [`beneath`]: paths resolved beneath a folder opened once, never through a link (`openat2`).
//! - [`cache`]: the node-local cache: entries keyed by URI and the store's version, one download
//!   per model however many replicas start at once, atomic, bounded, least recently used evicted
//!   unless in use.
//! - [`fetcher`]: the whole fetch, from a URI to a folder or a cache entry.
//! - [`node`]: the node cache on a cluster: a server owning the node's [`Cache`], and the
//!   init container's client with its fall back to a direct fetch.

pub mod archive;
pub mod beneath;
pub mod cache;
pub mod download;
pub mod env;
pub mod error;
pub mod fetcher;
pub mod guard;
pub mod node;
pub mod remote;
pub mod uri;

pub use cache::{Cache, Lease};
pub use error::{Error, Result};
pub use fetcher::{Fetcher, Report, failure_message};
