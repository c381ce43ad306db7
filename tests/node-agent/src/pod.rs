//! One pod's lifecycle (I/O shell): sandbox (IP, network namespace, volumes), init containers in
//! order, app containers under supervision, status writes, and termination. The decisions come
//! from the pure modules ([`crate::status`], [`crate::restart`], [`crate::volumes`], ...).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus, Secret, ServiceAccount};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::container;
use crate::env::{PodFacts, RefData};
use crate::error::Error;
use crate::ipam::{netns_name, veth_name};
use crate::restart::RestartPolicy;
use crate::shared::Kind;
pub use crate::shared::{ContainerHandle, Ctx, PodShared, SandboxState};
use crate::status::{self, ContainerRun, PodRun};
use crate::volumes::{self, Tokens};
use skiff_api::image::image_id;

/// Why a pod worker must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The pod has a deletionTimestamp: stop containers within `grace`, then delete the object.
    Delete {
        /// Grace period.
        grace: Duration,
    },
    /// The pod object is gone: kill at once.
    Gone,
    /// The agent is shutting down: stop within the shutdown grace, touch no API object.
    Shutdown,
}

/// The agent's handle on a pod worker.
pub struct PodHandle {
    /// Latest pod object.
    pub pod: watch::Sender<Pod>,
    /// Stop request.
    pub stop: watch::Sender<Option<Stop>>,
    /// The worker task.
    pub task: JoinHandle<()>,
}

/// Starts a worker for `pod`.
pub fn spawn(ctx: Arc<Ctx>, pod: Pod) -> PodHandle {
    let (pod_tx, pod_rx) = watch::channel(pod.clone());
    let (stop_tx, stop_rx) = watch::channel(None);
    let run = initial_run(&ctx, &pod);
    let (version, _) = watch::channel(0u64);
    let shared = Arc::new(PodShared {
        uid: pod.uid().unwrap_or_default(),
        name: pod.name_any(),
        namespace: pod.namespace().unwrap_or_else(|| "default".into()),
        object_ref: pod.object_ref(&()),
        ctx,
        pod: pod_rx,
        run: Mutex::new(run),
        version,
        sandbox: Mutex::new(SandboxState::default()),
        handles: Mutex::new(Vec::new()),
    });
    let task = tokio::spawn(worker(shared, stop_rx));
    PodHandle { pod: pod_tx, stop: stop_tx, task }
}

fn initial_run(ctx: &Ctx, pod: &Pod) -> PodRun {
    let map = ctx.image_map();
    let spec = pod.spec.clone().unwrap_or_default();
    let has_init = spec.init_containers.as_ref().is_some_and(|v| !v.is_empty());
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            let sidecar = c.restart_policy.as_deref() == Some("Always");
            ContainerRun::waiting(
                &c.name,
                c.image.as_deref().unwrap_or(""),
                image_id(&map, c.image.as_deref().unwrap_or("")),
                "PodInitializing",
                sidecar,
            )
        })
        .collect();
    let reason = if has_init { "PodInitializing" } else { "ContainerCreating" };
    let containers = spec
        .containers
        .iter()
        .map(|c| {
            ContainerRun::waiting(
                &c.name,
                c.image.as_deref().unwrap_or(""),
                image_id(&map, c.image.as_deref().unwrap_or("")),
                reason,
                false,
            )
        })
        .collect();
    PodRun {
        pod_ip: None,
        host_ip: ctx.node_ip.to_string(),
        sandbox_ready: false,
        start_time: Timestamp::now(),
        init,
        containers,
        restart_policy: RestartPolicy::parse(spec.restart_policy.as_deref()),
        problem: None,
        initialized: false,
    }
}

async fn worker(shared: Arc<PodShared>, mut stop_rx: watch::Receiver<Option<Stop>>) {
    let key = shared.key();
    let already_terminal = shared.pod().status.and_then(|s| s.phase).is_some_and(|p| status::is_terminal(&p));
    let logs = shared.ctx.logs.register(&shared.namespace, &shared.name, &shared.uid, container_names(&shared.pod()));
    if already_terminal {
        logs.finished();
    }
    let writer_cancel = CancellationToken::new();
    let writer = if already_terminal {
        None
    } else {
        let mut changes = shared.version.subscribe();
        changes.mark_changed(); // write the initial Pending status at once
        Some(tokio::spawn(status_writer(shared.clone(), changes, writer_cancel.clone())))
    };
    if !already_terminal {
        info!(pod = %key, "starting pod");
        tokio::select! {
            biased;
            _ = stop_rx.wait_for(Option::is_some) => {}
            _ = lifecycle(&shared) => {
                info!(pod = %key, phase = status::phase(&shared.run.lock().expect("run lock")), "pod finished");
                logs.finished();
            }
        }
    }
    let stop = match stop_rx.wait_for(Option::is_some).await {
        Ok(s) => s.expect("checked"),
        Err(_) => Stop::Shutdown,
    };
    info!(pod = %key, ?stop, "stopping pod");
    stop_containers(&shared, stop, &mut stop_rx).await;
    logs.finished();
    // Final status (not at agent shutdown: the API server may be stopping too), then the object
    // goes away as the kubelet does it.
    writer_cancel.cancel();
    if let Some(w) = writer {
        if matches!(*stop_rx.borrow(), Some(Stop::Shutdown) | None) {
            w.abort();
        } else {
            let _ = tokio::time::timeout(Duration::from_secs(5), w).await;
        }
    }
    // The sandbox goes before the object, as the kubelet reclaims a pod's resources before it
    // deletes it: once the pod is gone from the API, its network is gone too.
    teardown(&shared).await;
    if matches!(*stop_rx.borrow(), Some(Stop::Delete { .. })) {
        let api: Api<Pod> = Api::namespaced(shared.ctx.client.clone(), &shared.namespace);
        let dp = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions { uid: Some(shared.uid.clone()), resource_version: None }),
            ..Default::default()
        };
        match tokio::time::timeout(Duration::from_secs(10), api.delete(&shared.name, &dp)).await {
            Err(_) => warn!(pod = %key, "deleting the pod timed out"),
            Ok(Ok(_)) => info!(pod = %key, "pod deleted"),
            Ok(Err(e)) => {
                let e = Error::from(e);
                if !e.is_api_status(404) && !e.is_api_status(409) {
                    warn!(pod = %key, error = %e, "deleting the pod failed");
                }
            }
        }
    }
    drop(logs);
}

/// Names of the pod's init and app containers (those with a log).
fn container_names(pod: &Pod) -> Vec<String> {
    let spec = pod.spec.as_ref();
    let init = spec.and_then(|s| s.init_containers.as_ref()).into_iter().flatten();
    let app = spec.map(|s| s.containers.iter()).into_iter().flatten();
    init.chain(app).map(|c| c.name.clone()).collect()
}

/// Sandbox, init containers, app containers; returns once every app container is finished for
/// good (the pod is Succeeded or Failed), after tearing the sandbox down.
async fn lifecycle(shared: &Arc<PodShared>) {
    let mut delay = Duration::from_secs(1);
    loop {
        match setup(shared).await {
            Ok(()) => break,
            Err(msg) => {
                warn!(pod = %shared.key(), error = %msg, "pod sandbox setup failed; retrying");
                shared.event(EventType::Warning, "FailedCreatePodSandBox", msg.clone(), None);
                shared.update(|run| {
                    for c in run.init.iter_mut().chain(run.containers.iter_mut()) {
                        c.state = status::RunState::Waiting {
                            reason: "ContainerCreating".into(),
                            message: Some(msg.clone()),
                        };
                    }
                });
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
    let pod = shared.pod();
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = RestartPolicy::parse(spec.restart_policy.as_deref());
    let mut changes = shared.version.subscribe();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        if c.restart_policy.as_deref() == Some("Always") {
            let kind = Kind::Sidecar(i);
            start(shared, kind, RestartPolicy::Always);
            while !shared.container(kind).is_some_and(|c| c.init_done()) {
                if changes.changed().await.is_err() {
                    return;
                }
            }
        } else {
            let kind = Kind::Init(i);
            let done = start(shared, kind, policy.for_init());
            done.cancelled().await;
            if !shared.container(kind).is_some_and(|c| c.init_done()) {
                warn!(pod = %shared.key(), container = %c.name, "init container failed; the pod fails");
                teardown_network(shared).await;
                return;
            }
        }
    }
    shared.update(|run| {
        run.initialized = true;
        for c in &mut run.containers {
            if let status::RunState::Waiting { reason, .. } = &mut c.state {
                *reason = "ContainerCreating".into();
            }
        }
    });
    let dones: Vec<CancellationToken> =
        (0..spec.containers.len()).map(|i| start(shared, Kind::App(i), policy)).collect();
    for d in dones {
        d.cancelled().await;
    }
    // Every app container is done: stop sidecars, release the network.
    let deadline = Instant::now() + grace_of(&pod);
    stop_handles(shared, |k| matches!(k, Kind::Sidecar(_)), deadline).await;
    teardown_network(shared).await;
}

fn start(shared: &Arc<PodShared>, kind: Kind, policy: RestartPolicy) -> CancellationToken {
    let (stop_tx, stop_rx) = watch::channel(None);
    let done = CancellationToken::new();
    shared.handles.lock().expect("handles lock").push(ContainerHandle { kind, stop: stop_tx, done: done.clone() });
    tokio::spawn(container::supervise(shared.clone(), kind, policy, stop_rx, done.clone()));
    done
}

fn grace_of(pod: &Pod) -> Duration {
    let secs = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30);
    Duration::from_secs(secs.max(0) as u64)
}

/// The grace period a stop request allows.
pub fn stop_grace(stop: Stop, shutdown_grace: Duration) -> Duration {
    match stop {
        Stop::Delete { grace } => grace,
        Stop::Gone => Duration::ZERO,
        Stop::Shutdown => shutdown_grace,
    }
}

/// Stops app containers, then sidecars (reverse order), then anything else; a later, harsher stop
/// request shortens the deadline.
async fn stop_containers(shared: &Arc<PodShared>, stop: Stop, stop_rx: &mut watch::Receiver<Option<Stop>>) {
    let shutdown_grace = Duration::from_secs(shared.ctx.config.shutdown_grace_secs);
    let mut deadline = Instant::now() + stop_grace(stop, shutdown_grace);
    let groups: [fn(&Kind) -> bool; 3] =
        [|k| matches!(k, Kind::App(_)), |k| matches!(k, Kind::Sidecar(_)), |k| matches!(k, Kind::Init(_))];
    for group in groups {
        let fut = stop_handles(shared, group, deadline);
        tokio::pin!(fut);
        loop {
            tokio::select! {
                _ = &mut fut => break,
                changed = stop_rx.changed() => {
                    if changed.is_err() {
                        // The agent dropped the handle: treat as shutdown.
                        deadline = deadline.min(Instant::now() + shutdown_grace);
                    } else if let Some(s) = *stop_rx.borrow() {
                        deadline = deadline.min(Instant::now() + stop_grace(s, shutdown_grace));
                    }
                    for h in shared.handles.lock().expect("handles lock").iter() {
                        if h.stop.borrow().is_some() {
                            let _ = h.stop.send(Some(deadline));
                        }
                    }
                    if changed.is_err() {
                        fut.as_mut().await;
                        break;
                    }
                }
            }
        }
    }
}

async fn stop_handles(shared: &Arc<PodShared>, which: impl Fn(&Kind) -> bool, deadline: Instant) {
    let mut dones = Vec::new();
    for h in shared.handles.lock().expect("handles lock").iter().rev() {
        if which(&h.kind) {
            let _ = h.stop.send(Some(deadline));
            dones.push(h.done.clone());
        }
    }
    for d in dones {
        d.cancelled().await;
    }
}

/// Creates the sandbox: pod IP and network namespace, then volumes. Idempotent on retry.
async fn setup(shared: &Arc<PodShared>) -> Result<(), String> {
    let ctx = &shared.ctx;
    let pod = shared.pod();
    let spec = pod.spec.clone().unwrap_or_default();
    let dir = ctx.config.cluster_dir.join("sandboxes").join(&shared.uid);
    std::fs::create_dir_all(dir.join("work")).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    std::fs::create_dir_all(ctx.config.pods_dir()).map_err(|e| format!("creating the pods log dir: {e}"))?;
    shared.sandbox.lock().expect("sandbox lock").dir = dir.clone();

    let have_ip = shared.sandbox.lock().expect("sandbox lock").pod_ip;
    let pod_ip = match have_ip {
        Some(ip) => ip,
        None if spec.host_network == Some(true) => ctx.node_ip,
        None => {
            let ip = ctx.ipam.lock().expect("ipam lock").allocate().map_err(|e| e.to_string())?;
            let netns = netns_name(ctx.net.bridge(), &shared.uid);
            let veth = veth_name(&shared.uid);
            {
                let mut sb = shared.sandbox.lock().expect("sandbox lock");
                sb.allocated = Some(ip);
                sb.netns = Some(netns.clone());
                sb.veth = Some(veth.clone());
            }
            ctx.net.create_pod(&netns, &veth, ip, &ctx.pod_routes).await.map_err(|e| e.to_string())?;
            let wanted = crate::hostport::wanted(&spec, ctx.node_ip.into());
            let forwarders = crate::hostport::forward(&wanted, ip.into()).await?;
            shared.sandbox.lock().expect("sandbox lock").host_ports = forwarders;
            ip
        }
    };
    shared.sandbox.lock().expect("sandbox lock").pod_ip = Some(pod_ip);
    shared.update(|run| {
        run.pod_ip = Some(pod_ip.to_string());
        run.sandbox_ready = true;
    });
    debug!(pod = %shared.key(), ip = %pod_ip, "network ready");

    // Volumes.
    let refs = fetch_refs(shared, &pod).await?;
    let tokens = fetch_tokens(shared, &pod).await?;
    let facts = PodFacts { pod_ip: pod_ip.to_string(), host_ip: ctx.node_ip.to_string() };
    let mut plans = BTreeMap::new();
    for v in spec.volumes.iter().flatten() {
        let plan = volumes::plan_volume(&pod, v, &dir, &refs, &tokens, &facts)?;
        crate::sandbox::materialize(&plan).map_err(|e| e.to_string())?;
        plans.insert(v.name.clone(), plan);
    }
    let mut sb = shared.sandbox.lock().expect("sandbox lock");
    sb.plans = plans;
    sb.refs = refs;
    sb.ready = true;
    Ok(())
}

async fn fetch_refs(shared: &PodShared, pod: &Pod) -> Result<RefData, String> {
    let (cms, secrets) = volumes::referenced_objects(pod);
    let mut refs = RefData::default();
    let cm_api: Api<ConfigMap> = Api::namespaced(shared.ctx.client.clone(), &shared.namespace);
    for name in cms {
        match cm_api.get_opt(&name).await {
            Ok(Some(cm)) => {
                let mut data: BTreeMap<String, Vec<u8>> =
                    cm.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
                data.extend(cm.binary_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)));
                refs.config_maps.insert(name, data);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("getting configmap {name}: {e}")),
        }
    }
    let secret_api: Api<Secret> = Api::namespaced(shared.ctx.client.clone(), &shared.namespace);
    for name in secrets {
        match secret_api.get_opt(&name).await {
            Ok(Some(s)) => {
                let mut data: BTreeMap<String, Vec<u8>> =
                    s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
                data.extend(s.string_data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())));
                refs.secrets.insert(name, data);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("getting secret {name}: {e}")),
        }
    }
    Ok(refs)
}

async fn fetch_tokens(shared: &PodShared, pod: &Pod) -> Result<Tokens, String> {
    let mut tokens = Tokens::new();
    let requests = volumes::token_requests(pod);
    if requests.is_empty() {
        return Ok(tokens);
    }
    let sa = pod.spec.as_ref().and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into());
    let api: Api<ServiceAccount> = Api::namespaced(shared.ctx.client.clone(), &shared.namespace);
    for (key, audience, expiration) in requests {
        let req = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audience.into_iter().collect(),
                expiration_seconds: expiration,
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(shared.name.clone()),
                    uid: Some(shared.uid.clone()),
                }),
            },
            ..Default::default()
        };
        let resp: TokenRequest = api
            .create_subresource("token", &sa, &PostParams::default(), &req)
            .await
            .map_err(|e| format!("requesting a token for service account {sa}: {e}"))?;
        let token =
            resp.status.map(|s| s.token).ok_or_else(|| format!("no token returned for service account {sa}"))?;
        tokens.insert(key, token);
    }
    Ok(tokens)
}

/// Deletes the pod's network namespace and gives its IP back (the pod keeps its reported IP).
async fn teardown_network(shared: &PodShared) {
    let (netns, veth, ip) = {
        let mut sb = shared.sandbox.lock().expect("sandbox lock");
        sb.host_ports.drain(..).for_each(|task| task.abort());
        (sb.netns.take(), sb.veth.take(), sb.allocated.take())
    };
    if let (Some(netns), Some(veth)) = (netns, veth) {
        shared.ctx.net.delete_pod(&netns, &veth).await;
        debug!(pod = %shared.key(), %netns, "network namespace deleted");
    }
    if let Some(ip) = ip {
        shared.ctx.ipam.lock().expect("ipam lock").release(ip);
    }
    shared.update(|run| run.sandbox_ready = false);
}

async fn teardown(shared: &PodShared) {
    teardown_network(shared).await;
    let dir = shared.sandbox.lock().expect("sandbox lock").dir.clone();
    if !dir.as_os_str().is_empty() {
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }
}

/// Keeps the pod's status in the API in line with `run`: after each change (debounced), and
/// once more when cancelled.
async fn status_writer(shared: Arc<PodShared>, mut changes: watch::Receiver<u64>, cancel: CancellationToken) {
    let mut last: Option<PodStatus> = None;
    let mut failing = false;
    loop {
        let stopping = tokio::select! {
            _ = cancel.cancelled() => true,
            r = changes.changed() => r.is_err(),
            _ = tokio::time::sleep(Duration::from_secs(1)), if failing => false,
        };
        if !stopping {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match write_status(&shared, &mut last).await {
            Ok(()) => failing = false,
            Err(e) if e.is_api_status(404) || e.is_api_status(409) => return,
            Err(e) => {
                warn!(pod = %shared.key(), error = %e, "writing pod status failed");
                failing = true;
            }
        }
        if stopping {
            return;
        }
    }
}

async fn write_status(shared: &PodShared, last: &mut Option<PodStatus>) -> crate::error::Result<()> {
    let pod = shared.pod();
    let run = shared.run.lock().expect("run lock").clone();
    let api_status = pod.status.clone();
    // Our own last write wins over a stale watch copy; conditions owned by others come from the API.
    let mut previous = last.clone().or_else(|| api_status.clone());
    if let (Some(prev), Some(api)) = (previous.as_mut(), api_status.as_ref()) {
        let conds = prev.conditions.get_or_insert_with(Vec::new);
        for c in api.conditions.iter().flatten() {
            if !conds.iter().any(|x| x.type_ == c.type_) {
                conds.push(c.clone());
            }
        }
    }
    let gates: Vec<String> =
        pod.spec.iter().flat_map(|s| s.readiness_gates.iter().flatten()).map(|g| g.condition_type.clone()).collect();
    let computed = status::compute(&run, previous.as_ref(), &gates, pod.metadata.generation, Timestamp::now());
    if last.as_ref() == Some(&computed) {
        return Ok(());
    }
    let mut body = serde_json::to_value(&computed).unwrap_or_default();
    if let Some(obj) = body.as_object_mut() {
        for k in ["reason", "message"] {
            obj.entry(k).or_insert(serde_json::Value::Null);
        }
    }
    let patch = serde_json::json!({"metadata": {"uid": shared.uid}, "status": body});
    let api: Api<Pod> = Api::namespaced(shared.ctx.client.clone(), &shared.namespace);
    api.patch_status(&shared.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    debug!(pod = %shared.key(), phase = ?computed.phase, "status written");
    *last = Some(computed);
    Ok(())
}
