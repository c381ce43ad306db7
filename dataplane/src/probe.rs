//! The activator's own readiness checks of starting pods, as Knative's activator probes pods
//! directly: a pod its EndpointSlice lists as starting is probed every [`PROBE_EVERY`] on its
//! readiness path, and published to the revision's endpoints as soon as it answers 200, instead of
//! after the kubelet's next readiness probe (a second apart at best) and the EndpointSlice update
//! that follows. The router still sends only to pods the EndpointSlice calls ready.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::time::Instant;

use crate::endpoints::RevisionEndpoints;
use crate::key::RevisionKey;

/// How often a starting pod is probed.
pub const PROBE_EVERY: Duration = Duration::from_millis(25);
/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a pod is probed before the kubelet's readiness alone counts.
const PROBE_FOR: Duration = Duration::from_secs(300);

/// What is known of one revision's pods.
struct Pods {
    endpoints: Arc<RevisionEndpoints>,
    /// Ready by the EndpointSlice.
    ready: Vec<SocketAddr>,
    /// Starting by the EndpointSlice, and answering their readiness path.
    probed: BTreeSet<SocketAddr>,
    /// Starting and being probed.
    probing: BTreeSet<SocketAddr>,
}

impl Pods {
    fn publish(&self) {
        self.endpoints.set_addresses(self.ready.iter().chain(&self.probed).copied());
    }
}

/// Probes the starting pods of every revision.
pub struct Prober {
    client: Client<HttpConnector, Empty<Bytes>>,
    revisions: Mutex<HashMap<RevisionKey, Pods>>,
}

impl Default for Prober {
    fn default() -> Self {
        Prober { client: Client::builder(TokioExecutor::new()).build_http(), revisions: Mutex::new(HashMap::new()) }
    }
}

impl Prober {
    /// A revision's EndpointSlices changed: publishes its `ready` pods and those `starting` ones
    /// that already answered `path`, and probes the other starting ones.
    pub fn update(
        self: &Arc<Self>,
        endpoints: Arc<RevisionEndpoints>,
        path: &'static str,
        ready: Vec<SocketAddr>,
        starting: Vec<SocketAddr>,
    ) {
        let key = endpoints.key().clone();
        let mut revisions = self.revisions.lock().expect("prober lock");
        let pods = revisions.entry(key.clone()).or_insert_with(|| Pods {
            endpoints: endpoints.clone(),
            ready: Vec::new(),
            probed: BTreeSet::new(),
            probing: BTreeSet::new(),
        });
        pods.endpoints = endpoints;
        pods.ready = ready;
        pods.probed.retain(|addr| starting.contains(addr));
        pods.probing.retain(|addr| starting.contains(addr));
        pods.publish();
        for addr in starting {
            if !pods.probed.contains(&addr) && pods.probing.insert(addr) {
                tokio::spawn(self.clone().probe_until_ready(key.clone(), addr, path));
            }
        }
    }

    /// The revision is gone.
    pub fn forget(&self, revision: &RevisionKey) {
        self.revisions.lock().expect("prober lock").remove(revision);
    }

    async fn probe_until_ready(self: Arc<Self>, revision: RevisionKey, addr: SocketAddr, path: &'static str) {
        let deadline = Instant::now() + PROBE_FOR;
        while Instant::now() < deadline && self.still_probing(&revision, addr) {
            if self.answers(addr, path).await {
                let mut revisions = self.revisions.lock().expect("prober lock");
                if let Some(pods) = revisions.get_mut(&revision)
                    && pods.probing.remove(&addr)
                {
                    tracing::debug!(%revision, %addr, "a starting pod answered its readiness path");
                    pods.probed.insert(addr);
                    pods.publish();
                }
                return;
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
        if let Some(pods) = self.revisions.lock().expect("prober lock").get_mut(&revision) {
            pods.probing.remove(&addr);
        }
    }

    fn still_probing(&self, revision: &RevisionKey, addr: SocketAddr) -> bool {
        self.revisions.lock().expect("prober lock").get(revision).is_some_and(|p| p.probing.contains(&addr))
    }

    async fn answers(&self, addr: SocketAddr, path: &str) -> bool {
        let Ok(uri) = format!("http://{addr}{path}").parse() else { return false };
        match tokio::time::timeout(PROBE_TIMEOUT, self.client.get(uri)).await {
            Ok(Ok(response)) => response.status().is_success(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use tokio::net::TcpListener;

    use super::*;

    /// A server whose readiness path answers 503 until `ready` is set, then 200.
    async fn server(ready: Arc<std::sync::atomic::AtomicBool>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = move |_request: http::Request<hyper::body::Incoming>| {
            let ready = ready.load(std::sync::atomic::Ordering::Acquire);
            async move {
                let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                http::Response::builder().status(status).body(Empty::<Bytes>::new()).unwrap()
            }
        };
        tokio::spawn(skiff_http::serve(listener, handler, std::future::pending(), skiff_http::ServeLimits::default()));
        addr
    }

    #[tokio::test]
    async fn a_starting_pod_is_published_once_it_answers_and_dropped_when_it_goes() {
        let ready = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let starting = server(ready.clone()).await;
        let already = SocketAddr::from(([127, 0, 0, 1], 1));
        let endpoints = RevisionEndpoints::new(RevisionKey::new("ns", "r"), 0);
        let prober = Arc::new(Prober::default());
        prober.update(endpoints.clone(), "/v2/health/ready", vec![already], vec![starting]);
        tokio::time::sleep(PROBE_EVERY * 4).await;
        let published = || endpoints.ready().iter().map(|r| r.addr).collect::<Vec<_>>();
        assert_eq!(published(), [already], "not before it answers 200");
        ready.store(true, std::sync::atomic::Ordering::Release);
        for _ in 0..200 {
            if published().len() == 2 {
                break;
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
        assert_eq!(published(), [already, starting]);
        prober.update(endpoints.clone(), "/v2/health/ready", vec![already], vec![]);
        assert_eq!(published(), [already], "gone from the slice: gone from the endpoints");
    }
}
