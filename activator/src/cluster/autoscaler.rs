//! The activator's line to the autoscaler across processes: the autoscaler runs in the leader of
//! `skiff-controller`, found through its Lease (the holder's name) and its Service's EndpointSlices
//! (that pod's address). Pokes and the held counts are POSTed there as JSON with the activator's
//! ServiceAccount token; the autoscaler checks the token with a TokenReview.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::ListParams;
use skiff_dataplane::discovery::SERVICE_NAME;
use skiff_dataplane::report::{Held, HeldReport, POKE_PATH, REPORT_PATH};
use skiff_dataplane::{Poker, RevisionKey};

use crate::activator::Activator;

/// How long a found leader address is used before it is looked up again.
const LEADER_TTL: Duration = Duration::from_secs(5);
/// Bound on one call to the autoscaler.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the held counts are reported.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// Where the controller's leader is and how to reach it.
pub struct AutoscalerLink {
    leases: Api<Lease>,
    slices: Api<EndpointSlice>,
    lease: String,
    service: String,
    token_file: PathBuf,
    identity: String,
    client: Client<HttpConnector, Full<Bytes>>,
    leader: Mutex<Option<(SocketAddr, Instant)>>,
}

impl AutoscalerLink {
    /// The link of the activator `identity` to the leader of the Lease `lease`, among the pods of
    /// Service `service` (both in the namespace of `leases` and `slices`), authenticated with the
    /// token in `token_file`.
    pub fn new(
        leases: Api<Lease>,
        slices: Api<EndpointSlice>,
        lease: String,
        service: String,
        token_file: PathBuf,
        identity: String,
    ) -> Arc<AutoscalerLink> {
        Arc::new(AutoscalerLink {
            leases,
            slices,
            lease,
            service,
            token_file,
            identity,
            client: Client::builder(TokioExecutor::new()).build_http(),
            leader: Mutex::new(None),
        })
    }

    /// The leader's admin address: the pod named by the Lease's holder, at its Service's port.
    async fn leader(&self) -> Result<SocketAddr, String> {
        if let Some((addr, at)) = *self.leader.lock().expect("leader lock")
            && at.elapsed() < LEADER_TTL
        {
            return Ok(addr);
        }
        let lease = self.leases.get(&self.lease).await.map_err(|e| format!("lease {}: {e}", self.lease))?;
        let holder =
            lease.spec.and_then(|s| s.holder_identity).ok_or_else(|| format!("lease {} has no holder", self.lease))?;
        let slices = self
            .slices
            .list(&ListParams::default().labels(&format!("{SERVICE_NAME}={}", self.service)))
            .await
            .map_err(|e| format!("endpoints of {}: {e}", self.service))?;
        let addr = leader_address(&slices.items, &holder)
            .ok_or_else(|| format!("the leader {holder} is not among the endpoints of {}", self.service))?;
        *self.leader.lock().expect("leader lock") = Some((addr, Instant::now()));
        Ok(addr)
    }

    /// POSTs `body` to `path` on the leader; forgets the leader when the call fails.
    async fn post(&self, path: &str, body: Vec<u8>) -> Result<(), String> {
        let addr = self.leader().await?;
        let token = std::fs::read_to_string(&self.token_file)
            .map_err(|e| format!("reading the token {}: {e}", self.token_file.display()))?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{addr}{path}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::AUTHORIZATION, format!("Bearer {}", token.trim()))
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let outcome = match tokio::time::timeout(CALL_TIMEOUT, self.client.request(request)).await {
            Ok(Ok(response)) if response.status().is_success() => Ok(()),
            Ok(Ok(response)) => Err(format!("the autoscaler at {addr} answered {}", response.status())),
            Ok(Err(e)) => Err(format!("the autoscaler at {addr}: {e}")),
            Err(_) => Err(format!("the autoscaler at {addr} did not answer within {CALL_TIMEOUT:?}")),
        };
        if outcome.is_err() {
            *self.leader.lock().expect("leader lock") = None;
        }
        outcome
    }

    /// Reports what `activator` holds every [`REPORT_INTERVAL`], until dropped.
    pub async fn report_every_second(self: Arc<Self>, activator: Arc<Activator>) {
        let mut interval = tokio::time::interval(REPORT_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            interval.tick().await;
            let revisions: Vec<Held> =
                activator.held().iter().map(|(key, held)| Held::new(&self.identity, key, *held)).collect();
            if revisions.is_empty() {
                continue;
            }
            let body = serde_json::to_vec(&HeldReport { revisions }).expect("a report serializes");
            if let Err(e) = self.post(REPORT_PATH, body).await {
                tracing::warn!(error = %e, "cannot report held requests to the autoscaler");
            }
        }
    }
}

/// Pokes the autoscaler through a link, without waiting for the answer.
pub struct LinkPoker(pub Arc<AutoscalerLink>);

impl Poker for LinkPoker {
    fn poke(&self, revision: &RevisionKey, held: usize) {
        let (link, body) = (
            self.0.clone(),
            serde_json::to_vec(&Held::new(&self.0.identity, revision, held)).expect("a poke serializes"),
        );
        let revision = revision.clone();
        tokio::spawn(async move {
            if let Err(e) = link.post(POKE_PATH, body).await {
                tracing::warn!(%revision, error = %e, "cannot poke the autoscaler; the next report will carry the count");
            }
        });
    }
}

/// The address of the pod named `holder` in `slices` (at the slices' admin port).
fn leader_address(slices: &[EndpointSlice], holder: &str) -> Option<SocketAddr> {
    slices.iter().find_map(|slice| {
        let port = slice
            .ports
            .as_ref()?
            .iter()
            .find(|p| p.name.as_deref() == Some("admin"))
            .or(slice.ports.as_ref()?.first())?
            .port?;
        let endpoint =
            slice.endpoints.iter().find(|e| e.target_ref.as_ref().and_then(|r| r.name.as_deref()) == Some(holder))?;
        let ip = endpoint.addresses.first()?.parse().ok()?;
        Some(SocketAddr::new(ip, u16::try_from(port).ok()?))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_leader_is_the_lease_holders_pod() {
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "skiff-controller-abc"},
            "addressType": "IPv4",
            "ports": [{"name": "admin", "port": 8081}],
            "endpoints": [
                {"addresses": ["10.0.0.5"], "targetRef": {"kind": "Pod", "name": "skiff-controller-1"}},
                {"addresses": ["10.0.0.6"], "targetRef": {"kind": "Pod", "name": "skiff-controller-2"}},
            ],
        }))
        .unwrap();
        assert_eq!(
            leader_address(std::slice::from_ref(&slice), "skiff-controller-2"),
            Some("10.0.0.6:8081".parse().unwrap())
        );
        assert_eq!(leader_address(&[slice], "someone-else"), None);
    }
}
