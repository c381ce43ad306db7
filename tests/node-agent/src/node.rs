//! The Node object: registration, status heartbeats and the node Lease. The object and status
//! are built by pure functions; the writes are server-side applies under one field manager.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::error::Result;

/// Field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "skiff-node-agent";

/// Facts about this node.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    /// Node name.
    pub name: String,
    /// InternalIP.
    pub ip: Ipv4Addr,
    /// Port of the kubelet API (`daemonEndpoints.kubeletEndpoint`); 0 when it is off.
    pub kubelet_port: u16,
    /// Host name.
    pub hostname: String,
    /// CPU capacity (a quantity).
    pub cpu: String,
    /// Memory capacity (a quantity).
    pub memory: String,
    /// Pod capacity.
    pub pods: u32,
    /// Pod CIDR.
    pub pod_cidr: String,
    /// System information reported in `nodeInfo`.
    pub info: NodeSystemInfo,
}

impl NodeFacts {
    /// Reads CPU count, memory, host name and system identifiers from this machine (kubelet port
    /// 10250).
    pub fn detect(
        name: &str,
        ip: Ipv4Addr,
        pod_cidr: &str,
        pods: u32,
        cpu: Option<String>,
        memory: Option<String>,
    ) -> Self {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let mem_kib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(1024 * 1024);
        let os_image = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "Linux".into());
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        let hostname =
            nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| name.to_string());
        NodeFacts {
            name: name.to_string(),
            ip,
            kubelet_port: 10250,
            hostname,
            cpu: cpu.unwrap_or_else(|| cpus.to_string()),
            memory: memory.unwrap_or_else(|| format!("{mem_kib}Ki")),
            pods,
            pod_cidr: pod_cidr.to_string(),
            info: NodeSystemInfo {
                architecture: arch.into(),
                boot_id: read("/proc/sys/kernel/random/boot_id"),
                container_runtime_version: format!("skiff://{}", env!("CARGO_PKG_VERSION")),
                kernel_version: read("/proc/sys/kernel/osrelease"),
                kube_proxy_version: String::new(),
                kubelet_version: "v1.35.8".into(),
                machine_id: read("/etc/machine-id"),
                operating_system: "linux".into(),
                os_image,
                system_uuid: read("/etc/machine-id"),
                ..Default::default()
            },
        }
    }
}

/// The Node object the agent applies (labels and pod CIDR; no taints).
pub fn node_object(facts: &NodeFacts) -> Node {
    let labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", facts.name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", facts.info.architecture.as_str()),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", facts.info.architecture.as_str()),
        ("node.skiff.dev/agent", "skiff-node-agent"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Node {
        metadata: ObjectMeta { name: Some(facts.name.clone()), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec {
            pod_cidr: Some(facts.pod_cidr.clone()),
            pod_cidrs: Some(vec![facts.pod_cidr.clone()]),
            ..Default::default()
        }),
        status: None,
    }
}

/// The node status: capacity, allocatable, the Ready and pressure conditions, addresses, info.
/// `ready_since` is when Ready last became True (kept across heartbeats).
pub fn node_status(facts: &NodeFacts, now: Timestamp, ready_since: Timestamp) -> NodeStatus {
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu", facts.cpu.clone()),
        ("memory", facts.memory.clone()),
        ("pods", facts.pods.to_string()),
        ("ephemeral-storage", "100Gi".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Quantity(v)))
    .collect();
    let cond = |type_: &str, status: &str, reason: &str, message: &str| NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(ready_since)),
    };
    NodeStatus {
        capacity: Some(capacity.clone()),
        allocatable: Some(capacity),
        conditions: Some(vec![
            cond(
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "skiff node agent has sufficient memory available",
            ),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "skiff node agent has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "skiff node agent has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "skiff node agent is posting ready status"),
        ]),
        addresses: Some(vec![
            NodeAddress { type_: "InternalIP".into(), address: facts.ip.to_string() },
            NodeAddress { type_: "Hostname".into(), address: facts.hostname.clone() },
        ]),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint { port: facts.kubelet_port.into() }),
        }),
        node_info: Some(facts.info.clone()),
        ..Default::default()
    }
}

/// The node's Lease in `kube-node-lease`, owned by the Node.
pub fn lease_object(facts: &NodeFacts, node_uid: Option<String>, duration: Duration, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(facts.name.clone()),
            namespace: Some("kube-node-lease".into()),
            owner_references: node_uid.map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: facts.name.clone(),
                    uid,
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(facts.name.clone()),
            lease_duration_seconds: Some(duration.as_secs() as i32),
            renew_time: Some(MicroTime(now)),
            ..Default::default()
        }),
    }
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// Keeps the node registered and Ready: applies the Node, its status and Lease now and then every
/// `period` until cancelled. Returns after the first successful registration only through the
/// `registered` callback; errors are logged and retried.
pub async fn run(
    client: Client,
    facts: NodeFacts,
    period: Duration,
    cancel: CancellationToken,
    registered: tokio::sync::oneshot::Sender<()>,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    let ready_since = Timestamp::now();
    let mut registered = Some(registered);
    let mut node_uid: Option<String> = None;
    loop {
        match heartbeat(&nodes, &leases, &facts, ready_since, &mut node_uid, period).await {
            Ok(()) => {
                if let Some(tx) = registered.take() {
                    info!(node = %facts.name, ip = %facts.ip, "node registered and Ready");
                    let _ = tx.send(());
                }
            }
            Err(e) => warn!(error = %e, "node heartbeat failed"),
        }
        let wait = if registered.is_some() { Duration::from_secs(1) } else { period };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

async fn heartbeat(
    nodes: &Api<Node>,
    leases: &Api<Lease>,
    facts: &NodeFacts,
    ready_since: Timestamp,
    node_uid: &mut Option<String>,
    period: Duration,
) -> Result<()> {
    if node_uid.is_none() {
        let mut node = node_object(facts);
        node.metadata.managed_fields = None;
        let applied = nodes
            .patch(
                &facts.name,
                &apply_params(),
                &Patch::Apply(&serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": node.metadata,
                    "spec": node.spec,
                })),
            )
            .await?;
        *node_uid = applied.uid();
    }
    let now = Timestamp::now();
    let status = node_status(facts, now, ready_since);
    nodes
        .patch_status(
            &facts.name,
            &apply_params(),
            &Patch::Apply(&serde_json::json!({"apiVersion": "v1", "kind": "Node", "status": status})),
        )
        .await?;
    let lease = lease_object(facts, node_uid.clone(), (period * 4).max(Duration::from_secs(40)), now);
    leases
        .patch(
            &facts.name,
            &apply_params(),
            &Patch::Apply(&serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": lease.metadata,
                "spec": lease.spec,
            })),
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> NodeFacts {
        NodeFacts::detect("n1", Ipv4Addr::new(10, 244, 0, 1), "10.244.0.0/24", 110, Some("4".into()), None)
    }

    #[test]
    fn status_has_capacity_conditions_and_addresses() {
        let f = facts();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let t1 = Timestamp::from_second(1_800_000_010).unwrap();
        let s = node_status(&f, t1, t0);
        let cap = s.capacity.as_ref().unwrap();
        assert_eq!(cap["cpu"].0, "4");
        assert_eq!(cap["pods"].0, "110");
        assert!(cap["memory"].0.ends_with("Ki"));
        let ready = s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "True");
        assert_eq!(ready.last_heartbeat_time, Some(Time(t1)));
        assert_eq!(ready.last_transition_time, Some(Time(t0)));
        assert_eq!(s.addresses.as_ref().unwrap()[0].address, "10.244.0.1");
        assert_eq!(s.node_info.as_ref().unwrap().operating_system, "linux");
        assert_eq!(s.daemon_endpoints.unwrap().kubelet_endpoint.unwrap().port, 10250);
    }

    #[test]
    fn object_and_lease() {
        let f = facts();
        let n = node_object(&f);
        assert_eq!(n.labels()["kubernetes.io/hostname"], "n1");
        assert_eq!(n.spec.as_ref().unwrap().pod_cidr.as_deref(), Some("10.244.0.0/24"));
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let l = lease_object(&f, Some("uid-1".into()), Duration::from_secs(40), now);
        assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
        assert_eq!(l.metadata.owner_references.as_ref().unwrap()[0].uid, "uid-1");
        assert_eq!(l.spec.as_ref().unwrap().lease_duration_seconds, Some(40));
    }
}
