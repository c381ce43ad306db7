//! The models `skiff up` fetches (`s3://`, `gs://`, `https://`, `hf://`): one node-local cache
//! ([`skiff_fetch::Cache`], under the user's cache folder by default) that every replica of every
//! revision reads from, and the fetcher with the store settings of `skiff up`'s own environment
//! (KServe's variables: [`skiff_fetch::env`]).

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skiff_api::storage::StoreUri;
use skiff_dataplane::failing::Cause;
use skiff_fetch::{Cache, Fetcher, Lease, Report};

/// The cache and the fetcher.
#[derive(Debug)]
pub struct ModelStore {
    /// The cache.
    pub cache: Cache,
    /// The fetcher.
    pub fetcher: Fetcher,
}

/// What the latest fetch of a revision's model did, as the status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchStatus {
    /// The URI, as it may be shown.
    pub uri: String,
    /// Bytes of the model.
    pub bytes: u64,
    /// Bytes downloaded (0: it came from the cache).
    pub downloaded: u64,
    /// Whether the cache held it.
    pub cached: bool,
    /// How long the fetch took, listing the store included.
    pub millis: u64,
}

impl From<&Report> for FetchStatus {
    fn from(report: &Report) -> FetchStatus {
        FetchStatus {
            uri: report.uri.clone(),
            bytes: report.bytes,
            downloaded: report.downloaded,
            cached: report.cached,
            millis: (report.seconds * 1000.0).round() as u64,
        }
    }
}

impl ModelStore {
    /// The cache at `dir` bounded to `limit` bytes, fetching with this process's store settings.
    pub fn open(dir: &Path, limit: u64) -> anyhow::Result<Arc<ModelStore>> {
        let env = super::env::stores()?;
        Ok(Arc::new(ModelStore { cache: Cache::open(dir, limit)?, fetcher: Fetcher::new(env) }))
    }

    /// The model `uri` names, held for a replica; the error is the message a status shows and
    /// its cause (whether fetching again can succeed).
    pub async fn get(&self, uri: &StoreUri) -> Result<Lease, (String, Cause)> {
        self.cache
            .get(&self.fetcher, uri)
            .await
            .map_err(|e| (skiff_fetch::failure_message(uri.as_str(), &e), Cause::Fetch { exit_code: e.exit_code() }))
    }
}

/// The cache's folder unless told otherwise ([`super::env::model_cache_dir`]).
pub use super::env::model_cache_dir as default_dir;
