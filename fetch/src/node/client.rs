//! The init container's side of the node cache: ask it for a model with this process's store
//! settings, then copy the files it holds into the model's folder. [`Outcome`] tells the store's
//! answer about the model (final: a direct fetch would get it too) from a node cache that is not
//! there or failed on its side (the caller fetches directly). A node cache whose name resolves
//! but which refuses or drops the connection is asked again for a moment ([`ADMISSION_WAIT`]):
//! a NetworkPolicy engine admits a new pod's address only after the pod has started, and the init
//! container is the first thing the pod runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::wire::{ErrorBody, FORWARDED, ModelAnswer, ModelRequest, is_final};
use crate::download;
use crate::error::Error;
use crate::fetcher::Report;

/// How long connecting to the node cache may take: it runs on the same node.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a connection the node cache's address refuses or drops is tried again. The node
/// cache admits model pods by a NetworkPolicy, and a policy engine learns a new pod's address a
/// moment after the pod starts (kube-router, Calico and Cilium sync on the pod's update): on the
/// test cluster's real node, the init container's first connection was refused every time.
pub const ADMISSION_WAIT: Duration = Duration::from_secs(3);

/// The first pause between two tries (doubled each time, up to [`MAX_PAUSE`]).
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(500);

/// Why a fetch through the node cache did not give the model.
#[derive(Debug)]
pub enum Outcome {
    /// The store's answer (missing, refused, ...) or the local disk: final.
    Failed(Error),
    /// The node cache is not there or failed on its side: fetch directly.
    Unavailable(String),
}

/// The store settings of this process that the node cache gets: [`FORWARDED`] only.
pub fn forwarded_env(lookup: impl Fn(&str) -> Option<String>) -> BTreeMap<String, String> {
    FORWARDED.iter().filter_map(|name| lookup(name).map(|value| ((*name).to_owned(), value))).collect()
}

/// Fetches `uri` into `dir` (created if missing) through the node cache at `node` (its base URL),
/// with the store settings `env`; `timeout` bounds the whole fetch.
pub async fn fetch(
    node: &str,
    uri: &str,
    env: BTreeMap<String, String>,
    dir: &Path,
    timeout: Duration,
) -> Result<Report, Outcome> {
    let started = Instant::now();
    // An error means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(timeout)
        .build()
        .map_err(|e| Outcome::Unavailable(format!("an HTTP client: {e}")))?;
    let base = node.trim_end_matches('/');
    let unavailable = |what: &str, e: &dyn std::fmt::Display| Outcome::Unavailable(format!("{what}: {e}"));
    let request = ModelRequest { uri: uri.to_owned(), env };
    let body = serde_json::to_vec(&request).map_err(|e| unavailable("the request", &e))?;
    resolves(base).await?;
    let ask = || client.post(format!("{base}/v1/models")).header("content-type", "application/json").body(body.clone());
    let (mut pause, mut tries) = (FIRST_PAUSE, 1);
    let response = loop {
        match ask().send().await {
            Err(e) if e.is_connect() && started.elapsed() + pause < ADMISSION_WAIT => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                tries += 1;
            }
            Err(e) => return Err(unavailable(&format!("asking the node cache ({tries} tries)"), &e)),
            Ok(response) => break response,
        }
    };
    let status = response.status();
    let bytes = response.bytes().await.map_err(|e| unavailable("reading the node cache's answer", &e))?;
    if !status.is_success() {
        return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(ErrorBody { fetch: Some(wire), .. }) if is_final(&Error::from(wire.clone())) => {
                Outcome::Failed(wire.into())
            }
            Ok(ErrorBody { error, .. }) => Outcome::Unavailable(format!("the node cache answered {status}: {error}")),
            Err(_) => Outcome::Unavailable(format!("the node cache answered {status}")),
        });
    }
    let answer: ModelAnswer = serde_json::from_slice(&bytes).map_err(|e| unavailable("the node cache's answer", &e))?;
    std::fs::create_dir_all(dir).map_err(|e| Outcome::Failed(Error::disk(dir)(e)))?;
    let mut written = Vec::new();
    let copied = copy(&client, base, &answer, dir, &mut written).await;
    let _ = client.delete(format!("{base}/v1/models/{}", answer.key)).bearer_auth(&answer.ticket).send().await;
    if let Err(outcome) = copied {
        if matches!(outcome, Outcome::Unavailable(_)) {
            for path in written {
                let _ = std::fs::remove_file(path);
            }
        }
        return Err(outcome);
    }
    Ok(Report {
        uri: answer.uri,
        objects: answer.objects,
        downloaded: answer.downloaded,
        bytes: answer.files.iter().map(|f| f.size).sum(),
        seconds: started.elapsed().as_secs_f64(),
        cached: answer.cached,
    })
}

/// Whether the node cache's host has an address: a name that does not resolve means no node cache
/// here (no Service), which is not worth waiting for.
async fn resolves(base: &str) -> Result<(), Outcome> {
    let url =
        reqwest::Url::parse(base).map_err(|e| Outcome::Unavailable(format!("the node cache's URL {base}: {e}")))?;
    let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(80);
    match tokio::net::lookup_host((host, port)).await.map(|mut addresses| addresses.next()) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err(Outcome::Unavailable(format!("{host} has no address"))),
        Err(e) => Err(Outcome::Unavailable(format!("resolving {host}: {e}"))),
    }
}

/// Copies every file of `answer` into `dir`, recording each file it creates in `written`.
async fn copy(
    client: &reqwest::Client,
    base: &str,
    answer: &ModelAnswer,
    dir: &Path,
    written: &mut Vec<PathBuf>,
) -> Result<(), Outcome> {
    for file in &answer.files {
        let target = download::inside(dir, &file.path).ok_or_else(|| {
            Outcome::Unavailable(format!("the node cache named a file outside the model: {:?}", file.path))
        })?;
        let disk = |path: &Path| {
            let path = path.to_owned();
            move |e| Outcome::Failed(Error::disk(path)(e))
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(disk(parent))?;
        }
        let response = client
            .get(format!("{base}/v1/models/{}/{}", answer.key, file.path))
            .bearer_auth(&answer.ticket)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| Outcome::Unavailable(format!("reading {} from the node cache: {e}", file.path)))?;
        let mut out = tokio::fs::File::create(&target).await.map_err(disk(&target))?;
        written.push(target.clone());
        let mut stream = response.bytes_stream();
        let mut size = 0u64;
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| Outcome::Unavailable(format!("reading {} from the node cache: {e}", file.path)))?;
            size += chunk.len() as u64;
            out.write_all(&chunk).await.map_err(disk(&target))?;
        }
        out.flush().await.map_err(disk(&target))?;
        if size != file.size {
            return Err(Outcome::Unavailable(format!(
                "the node cache sent {size} bytes of {}, not {}",
                file.path, file.size
            )));
        }
    }
    Ok(())
}
