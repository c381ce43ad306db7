//! The whole fetch: list what a URI names, download it, unpack a lone archive; into a folder
//! (`skiff-fetch URI DIR`, the init container) or into the node's [`crate::Cache`].

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::archive;
use crate::download::{self, Plan};
use crate::env::StoreEnv;
use crate::error::{Error, Result};
use crate::guard::Reach;
use crate::remote::{self, Object, Remote};
use crate::uri::{ToStore, redact};

/// How long a whole fetch may take by default (listing, download, unpacking, a wait for another
/// replica's download of the same model).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What a fetch did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The URI, as it may be shown.
    pub uri: String,
    /// Objects the URI named.
    pub objects: usize,
    /// Bytes downloaded; 0 when the model came from the cache.
    pub downloaded: u64,
    /// Bytes of the model on disk.
    pub bytes: u64,
    /// Seconds the fetch took, listing and any wait included.
    pub seconds: f64,
    /// Whether the model was in the cache already.
    pub cached: bool,
}

/// Fetches models with one set of store settings.
#[derive(Debug, Clone)]
pub struct Fetcher {
    /// The stores' settings.
    pub env: StoreEnv,
    /// How downloads run.
    pub plan: Plan,
    /// The bound on one fetch.
    pub timeout: Duration,
    /// The addresses its connections may reach, at every hop.
    pub reach: Reach,
}

impl Fetcher {
    /// A fetcher with `env`'s stores and the default plan and timeout.
    pub fn new(env: StoreEnv) -> Fetcher {
        Fetcher { env, plan: Plan::default(), timeout: DEFAULT_TIMEOUT, reach: Reach::Anywhere }
    }

    /// The store of `uri` and the objects it names.
    pub async fn list(&self, uri: &(impl ToStore + ?Sized)) -> Result<(Arc<dyn Remote>, Vec<Object>)> {
        let remote = remote::open(&*uri.to_store()?, &self.env, self.reach)?;
        let objects = self.bounded("listing", remote.list()).await?;
        Ok((remote, objects))
    }

    /// Downloads `objects` into `dir` (existing, empty) and unpacks a lone archive; returns the
    /// bytes downloaded and the bytes the folder holds.
    pub async fn download(&self, remote: &dyn Remote, objects: &[Object], dir: &Path) -> Result<(u64, u64)> {
        let downloaded = self.bounded("the download", download::download(remote, objects, dir, self.plan)).await?;
        let archive = match objects {
            [only] => archive::format_of(&only.path).map(|format| (dir.join(&only.path), format)),
            _ => None,
        };
        let Some((path, format)) = archive else { return Ok((downloaded, downloaded)) };
        let (uri, dir, max) = (remote.uri().to_owned(), dir.to_owned(), self.plan.max_bytes);
        let unpacked = tokio::task::spawn_blocking(move || archive::unpack(&uri, &path, format, &dir, max))
            .await
            .map_err(|e| Error::Config(format!("unpacking failed: {e}")))??;
        Ok((downloaded, unpacked))
    }

    /// Fetches `uri` into `dir`, created if missing, without a cache.
    pub async fn fetch(&self, uri: &(impl ToStore + ?Sized), dir: &Path) -> Result<Report> {
        let started = Instant::now();
        let (remote, objects) = self.list(uri).await?;
        std::fs::create_dir_all(dir).map_err(Error::disk(dir))?;
        let (downloaded, bytes) = self.download(remote.as_ref(), &objects, dir).await?;
        Ok(Report {
            uri: remote.uri().to_owned(),
            objects: objects.len(),
            downloaded,
            bytes,
            seconds: started.elapsed().as_secs_f64(),
            cached: false,
        })
    }

    async fn bounded<T>(&self, what: &str, work: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::time::timeout(self.timeout, work)
            .await
            .map_err(|_| Error::Timeout { what: what.to_owned(), seconds: self.timeout.as_secs() })?
    }
}

/// What a failed fetch of `uri` says where a replica's failure is shown: the model pod's
/// termination message on a cluster (`skiff-fetch`), a revision's status in `skiff up`. It names
/// the URI (redacted) even for errors that are about the local disk or a time limit.
pub fn failure_message(uri: &str, error: &Error) -> String {
    let shown = redact(uri);
    let text = error.to_string();
    if text.starts_with(&shown) {
        format!("fetching the model failed: {text}")
    } else {
        format!("fetching the model failed: {shown}: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_always_names_the_uri_and_never_its_credentials() {
        let disk =
            Error::Disk { path: "/cache/tmp/k/model.onnx".into(), source: std::io::Error::from_raw_os_error(28) };
        assert_eq!(
            failure_message("https://u:SECRET@h/m.onnx?sig=SECRET", &disk),
            "fetching the model failed: https://h/m.onnx?…: /cache/tmp/k/model.onnx: No space left on device (os error 28)"
        );
        let missing = Error::NotFound { uri: "s3://b/m".into(), cause: "NoSuchKey".into() };
        assert_eq!(failure_message("s3://b/m", &missing), "fetching the model failed: s3://b/m: not found: NoSuchKey");
    }
}
