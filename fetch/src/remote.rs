//! A store as the fetcher sees it: the objects a URI names, each with its path under the model's
//! folder, its size and its version, and ranged reads of one object. Implemented over
//! `object_store` for S3 and GCS ([`store`]), plain HTTP for one file ([`http`]) and the Hugging
//! Face Hub's layout ([`hf`]).

pub mod hf;
pub mod http;
pub mod store;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

use crate::env::StoreEnv;
use crate::error::{Error, Result};
use crate::guard::{self, Reach};
use crate::uri::{self, Location, StoreUri};

/// One object of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Where the store keeps it (a key, a URL's path, a file in a repository).
    pub source: String,
    /// Its path under the model's folder, `/`-separated and relative.
    pub path: String,
    /// Its size in bytes, when the store says.
    pub size: Option<u64>,
    /// What changes when its content does (an ETag, a generation, a commit); `None` when the
    /// store gives nothing to tell versions apart, and then it is never served from a cache.
    pub version: Option<String>,
    /// Whether the store answers ranged reads of it.
    pub ranged: bool,
}

/// A store's objects under one URI.
#[async_trait]
pub trait Remote: Send + Sync {
    /// The URI, as it may be shown.
    fn uri(&self) -> &str;

    /// Every object the URI names; an error when there is none.
    async fn list(&self) -> Result<Vec<Object>>;

    /// The bytes of `object` in `range` (its whole content when `range` is `None`).
    async fn read(&self, object: &Object, range: Option<Range<u64>>) -> Result<BoxStream<'static, Result<Bytes>>>;
}

pub use crate::guard::CONNECT_TIMEOUT;

/// The longest pause in a transfer: a store that sends nothing for this long is cut off.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The store `uri` names, with the settings of `env`, its connections held to `reach`.
pub fn open(uri: &StoreUri, env: &StoreEnv, reach: Reach) -> Result<Arc<dyn Remote>> {
    install_crypto();
    let text = uri.as_str();
    Ok(match uri.location().clone() {
        Location::S3 { bucket, prefix } => Arc::new(store::ObjectRemote::s3(text, &bucket, prefix, &env.s3, reach)?),
        Location::Gcs { bucket, prefix } => Arc::new(store::ObjectRemote::gcs(text, &bucket, prefix, &env.gcs, reach)?),
        Location::Http { url } => Arc::new(http::HttpRemote::new(&url, reach)?),
        Location::Hf { repo, revision } => Arc::new(hf::HfRemote::new(text, repo, revision, &env.hf, reach)?),
    })
}

/// rustls's process-wide provider (ring, as the rest of Skiff), installed once.
fn install_crypto() {
    // An error means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An HTTP client with Skiff's timeouts, checking certificates (rustls), its connections held to
/// `reach` (redirects are followed, up to 10, each hop checked).
pub(crate) fn http_client(reach: Reach) -> Result<reqwest::Client> {
    install_crypto();
    let builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT).read_timeout(READ_TIMEOUT);
    guard::hold(builder, reach).build().map_err(|e| Error::Config(format!("an HTTP client: {e}")))
}

/// The error for an HTTP answer `status` to a request about `uri`.
pub(crate) fn status_error(uri: &str, status: reqwest::StatusCode, what: &str) -> Error {
    let (uri, cause) = (uri.to_owned(), format!("{what}: HTTP {status}"));
    match status.as_u16() {
        404 | 410 => Error::NotFound { uri, cause },
        401 | 403 => Error::Denied { uri, cause },
        _ => Error::Transfer { uri, cause },
    }
}

/// The error for a request about `uri` that got no answer or a broken one.
pub(crate) fn transfer_error(uri: &str, error: &reqwest::Error) -> Error {
    if let Some(refused) = guard::refused_in(error) {
        return Error::Unreachable { uri: uri.to_owned(), host: refused.host.clone() };
    }
    let mut cause = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        cause.push_str(": ");
        cause.push_str(&inner.to_string());
        source = inner.source();
    }
    // reqwest names the URL it asked, which may carry a signature.
    if let Some(url) = error.url() {
        cause = cause.replace(url.as_str(), &uri::redact(url.as_str()));
    }
    Error::Transfer { uri: uri.to_owned(), cause: crate::error::tidy(&cause) }
}

/// The last segment of a `/`-separated path.
pub(crate) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
