//! What a pod's worker, its container supervisors and its status writer share: the agent's
//! context, the pod's sandbox and run state, and which container is which. A module of its own, so
//! that the pod worker (`pod`) and the container supervisor (`container`) both use it without
//! importing each other.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use kube::Client;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder};
use skiff_api::image::ImageMap;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::config::Config;
use crate::env::RefData;
use crate::ipam::Ipam;
use crate::logfiles::PodLogs;
use crate::net::Network;
use crate::process::Programs;
use crate::status::{ContainerRun, PodRun};
use crate::volumes::VolumePlan;

/// Which container of the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Init container `i` (runs to completion).
    Init(usize),
    /// Init container `i` with `restartPolicy: Always` (a native sidecar).
    Sidecar(usize),
    /// App container `i`.
    App(usize),
}

impl Kind {
    /// The container's field path in events (`spec.containers{name}`).
    pub fn field_path(self, name: &str) -> String {
        match self {
            Kind::Init(_) | Kind::Sidecar(_) => format!("spec.initContainers{{{name}}}"),
            Kind::App(_) => format!("spec.containers{{{name}}}"),
        }
    }

    pub(crate) fn spec(self, shared: &PodShared) -> Option<Container> {
        let pod = shared.pod();
        let spec = pod.spec?;
        match self {
            Kind::Init(i) | Kind::Sidecar(i) => spec.init_containers?.get(i).cloned(),
            Kind::App(i) => spec.containers.get(i).cloned(),
        }
    }
}

/// What the agent shares with every pod worker.
pub struct Ctx {
    /// API client.
    pub client: Client,
    /// Settings.
    pub config: Config,
    /// `ip` and this binary.
    pub programs: Arc<Programs>,
    /// The pod network.
    pub net: Network,
    /// Pod IP allocator.
    pub ipam: Mutex<Ipam>,
    /// The node's IP (pods' hostIP, hostNetwork pods' IP).
    pub node_ip: Ipv4Addr,
    /// Environment every container starts from (passed-through host variables, service variables).
    pub base_env: Vec<(String, String)>,
    /// Host routes added in each pod namespace (the `kubernetes` Service IP).
    pub pod_routes: Vec<Ipv4Addr>,
    /// Mount points the agent created on the host (removed at exit).
    pub mount_points: Mutex<Vec<PathBuf>>,
    /// Event recorder.
    pub recorder: Recorder,
    /// The pods whose container logs the kubelet API serves.
    pub logs: Arc<PodLogs>,
}

impl Ctx {
    /// The image map, read fresh (so it can be edited while the agent runs); empty if unset or unreadable.
    pub fn image_map(&self) -> ImageMap {
        match &self.config.image_map {
            Some(path) => ImageMap::load(path).unwrap_or_else(|e| {
                warn!(error = %e, "cannot read the image map");
                ImageMap::default()
            }),
            None => ImageMap::default(),
        }
    }
}

/// Sandbox state, filled in step by step so teardown knows what exists.
#[derive(Debug, Default)]
pub struct SandboxState {
    /// Allocated pod IP (released at teardown).
    pub allocated: Option<Ipv4Addr>,
    /// Pod IP.
    pub pod_ip: Option<Ipv4Addr>,
    /// Network namespace, once created.
    pub netns: Option<String>,
    /// Host veth name.
    pub veth: Option<String>,
    /// The pod's private directory.
    pub dir: PathBuf,
    /// Volumes by name.
    pub plans: BTreeMap<String, VolumePlan>,
    /// ConfigMaps and Secrets the pod refers to.
    pub refs: RefData,
    /// Network and volumes are ready.
    pub ready: bool,
    /// The forwarders of its `hostPort`s ([`crate::hostport`]), aborted at teardown.
    pub host_ports: Vec<JoinHandle<()>>,
}

/// A running container supervisor.
pub struct ContainerHandle {
    /// Which container.
    pub kind: Kind,
    /// Kill deadline; `Some` asks the supervisor to stop its container and return.
    pub stop: watch::Sender<Option<Instant>>,
    /// Cancelled when the supervisor returns.
    pub done: CancellationToken,
}

/// State shared by a pod's worker, its container supervisors and its status writer.
pub struct PodShared {
    /// Agent context.
    pub ctx: Arc<Ctx>,
    /// Pod UID.
    pub uid: String,
    /// Pod name.
    pub name: String,
    /// Pod namespace.
    pub namespace: String,
    /// Latest pod object.
    pub pod: watch::Receiver<Pod>,
    /// What the agent knows about the pod's containers.
    pub run: Mutex<PodRun>,
    /// Bumped on every change of `run`.
    pub version: watch::Sender<u64>,
    /// Sandbox.
    pub sandbox: Mutex<SandboxState>,
    /// Container supervisors.
    pub handles: Mutex<Vec<ContainerHandle>>,
    /// Reference used for events.
    pub object_ref: ObjectReference,
}

impl PodShared {
    /// Changes the pod's run state and wakes the status writer.
    pub fn update(&self, f: impl FnOnce(&mut PodRun)) {
        {
            let mut run = self.run.lock().expect("run lock");
            f(&mut run);
        }
        self.version.send_modify(|v| *v += 1);
    }

    /// Changes one container's state.
    pub fn update_container(&self, kind: Kind, f: impl FnOnce(&mut ContainerRun)) {
        self.update(|run| {
            let c = match kind {
                Kind::Init(i) | Kind::Sidecar(i) => run.init.get_mut(i),
                Kind::App(i) => run.containers.get_mut(i),
            };
            if let Some(c) = c {
                f(c);
            }
        });
    }

    /// A copy of one container's state.
    pub fn container(&self, kind: Kind) -> Option<ContainerRun> {
        let run = self.run.lock().expect("run lock");
        match kind {
            Kind::Init(i) | Kind::Sidecar(i) => run.init.get(i).cloned(),
            Kind::App(i) => run.containers.get(i).cloned(),
        }
    }

    /// The current pod object.
    pub fn pod(&self) -> Pod {
        self.pod.borrow().clone()
    }

    /// Publishes an event about the pod (best effort, in the background). `field_path` names a
    /// container (`spec.containers{name}`), as the kubelet does; it also keeps events about
    /// different containers apart.
    pub fn event(&self, type_: EventType, reason: &str, note: String, field_path: Option<String>) {
        let recorder = self.ctx.recorder.clone();
        let mut reference = self.object_ref.clone();
        reference.field_path = field_path;
        let ev = KubeEvent {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: reason.to_string(),
            secondary: None,
        };
        tokio::spawn(async move {
            if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(5), recorder.publish(&ev, &reference)).await {
                debug!(error = %e, "publishing an event failed");
            }
        });
    }

    /// `<ns>/<name>` for logs.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
