//! The body of the "Try it" curl: an example infer request built from the model's own metadata
//! (`GET /v2/models/NAME`, [`skiff_api::example`]), read through `skiff up`'s router once one of
//! the service's replicas is ready, so that looking at a page never wakes a service at zero. Each
//! revision's example is read once and kept (a page refreshing itself sends no request to the
//! model); a failed read is tried again after [`RETRY`]. On a cluster the app sends nothing to the
//! models (their URLs need not resolve from its pod): the curl reads the metadata instead.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::backend::ServiceView;

/// How long reading the metadata may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// When a failed read is tried again.
pub const RETRY: Duration = Duration::from_secs(60);

/// The longest example shown inline; a bigger one is not shown.
const MAX_BYTES: usize = 16 * 1024;

/// What was read for one revision.
#[derive(Debug, Clone)]
enum Read {
    Example(String),
    Failed(Instant),
}

/// Examples read, by where they were read (router or URL), namespace, service and revision.
fn cache() -> &'static Mutex<HashMap<String, Read>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Read>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// The example request's body for `service` (`{"inputs": ...}` for V2, `{"instances": ...}` for
/// V1) read through `router`, or `None` without a router, while no replica is ready, or when its
/// metadata could not be read.
pub async fn body(router: Option<&str>, service: &ServiceView) -> Option<String> {
    let router = router?;
    let revision = service.revisions.iter().find(|r| r.ready.unwrap_or(0) > 0)?;
    let url = service.url.as_deref()?;
    let host = url.trim_start_matches("http://").trim_start_matches("https://");
    let base = format!("http://{router}");
    let key = format!("{base} {} {} {}", service.namespace, service.name, revision.name);
    match cache().lock().unwrap_or_else(PoisonError::into_inner).get(&key) {
        Some(Read::Example(body)) => return Some(body.clone()),
        Some(Read::Failed(at)) if at.elapsed() < RETRY => return None,
        _ => {}
    }
    let read = match read(&base, host, service).await {
        Some(body) => Read::Example(body),
        None => Read::Failed(Instant::now()),
    };
    cache().lock().unwrap_or_else(PoisonError::into_inner).insert(key, read.clone());
    match read {
        Read::Example(body) => Some(body),
        Read::Failed(_) => None,
    }
}

async fn read(base: &str, host: &str, service: &ServiceView) -> Option<String> {
    let request = http::Request::get(format!("{base}/v2/models/{}", service.name))
        .header(http::header::HOST, host)
        .body(Empty::<Bytes>::new())
        .ok()?;
    let client = Client::builder(TokioExecutor::new()).build_http();
    let fetch = async {
        let response = client.request(request).await.ok()?;
        let ok = response.status().is_success();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        ok.then_some(body)
    };
    let metadata: Value = serde_json::from_slice(&tokio::time::timeout(TIMEOUT, fetch).await.ok()??).ok()?;
    let example = skiff_api::example::example_request(&metadata).ok()?;
    let body = if service.protocol == "v1" { v1(&example)? } else { example };
    Some(body.to_string()).filter(|b| b.len() <= MAX_BYTES)
}

/// The V1 form of a V2 example of one input shaped `[1, n]`: `{"instances": [[...n values]]}`.
fn v1(example: &Value) -> Option<Value> {
    let [input] = example["inputs"].as_array()?.as_slice() else { return None };
    let shape: Vec<u64> = input["shape"].as_array()?.iter().filter_map(Value::as_u64).collect();
    (shape.len() == 2 && shape[0] == 1).then(|| serde_json::json!({ "instances": [input["data"].clone()] }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_example_is_one_instance_of_a_single_row_input() {
        let v2 = serde_json::json!({"inputs": [{"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1.0, 1.0, 1.0]}]});
        assert_eq!(v1(&v2), Some(serde_json::json!({"instances": [[1.0, 1.0, 1.0]]})));
        let two = serde_json::json!({"inputs": [v2["inputs"][0].clone(), v2["inputs"][0].clone()]});
        assert_eq!(v1(&two), None, "two inputs have no V1 form here");
    }
}
