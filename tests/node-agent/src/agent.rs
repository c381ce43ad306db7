//! The agent (I/O shell): connect, prepare the host network, register the node, watch the pods
//! bound to it and hand each to a pod worker; on SIGTERM/SIGINT stop every pod and remove every
//! namespace, veth and the bridge (the Node object stays).

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::ipam::Ipam;
use crate::logfiles::PodLogs;
use crate::net::Network;
use crate::node::{self, NodeFacts};
use crate::pod::{self, Ctx, PodHandle, Stop};
use crate::process::Programs;

/// Builds the API client: `--kubeconfig`, else `$SKIFF_NODE_KUBECONFIG`, else `$KUBECONFIG`, else inference.
pub async fn client(config: &Config) -> Result<(Client, kube::Config)> {
    let path = config
        .kubeconfig
        .clone()
        .or_else(|| std::env::var_os("SKIFF_NODE_KUBECONFIG").map(Into::into))
        .or_else(|| std::env::var_os("KUBECONFIG").map(Into::into));
    let cfg = match path {
        Some(path) => {
            let kc = Kubeconfig::read_from(&path).map_err(|source| Error::Kubeconfig { path: path.clone(), source })?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|source| Error::Kubeconfig { path, source })?
        }
        None => kube::Config::infer().await.map_err(|e| Error::Config(format!("no kubeconfig: {e}")))?,
    };
    let client = Client::try_from(cfg.clone())?;
    Ok((client, cfg))
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(config: Config) -> Result<()> {
    config.validate()?;
    let (client, kube_config) = client(&config).await?;
    let programs = Arc::new(Programs::discover()?);
    // Before the network is touched: a bad certificate or a busy port ends the agent here.
    let logs = PodLogs::new(config.clone());
    let kubelet_cancel = CancellationToken::new();
    let kubelet_port =
        crate::kubelet_api::start(&config, client.clone(), logs.clone(), kubelet_cancel.clone()).await?.unwrap_or(0);
    let cidr = config.cidr();
    let net = Network::new(programs.ip.clone(), &config.bridge, cidr);
    let stale = net.sweep().await;
    if stale > 0 {
        info!(stale, "removed pod namespaces left by an earlier run");
    }
    net.ensure_bridge().await?;
    info!(bridge = %config.bridge, %cidr, gateway = %cidr.gateway(), "pod network ready");

    // The kubernetes Service address, forwarded to the API server.
    let proxy_cancel = CancellationToken::new();
    let mut pod_routes = Vec::new();
    let mut base_env: Vec<(String, String)> =
        config.pass_env.iter().filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v))).collect();
    if !config.no_api_proxy {
        let upstream = format!(
            "{}:{}",
            kube_config.cluster_url.host().unwrap_or("127.0.0.1").trim_start_matches('[').trim_end_matches(']'),
            kube_config.cluster_url.port_u16().unwrap_or(443)
        );
        let listen = SocketAddr::from((config.api_service_ip, 443));
        let started = async {
            net.add_local_address(config.api_service_ip).await?;
            crate::apiproxy::start(listen, upstream, proxy_cancel.clone()).await
        };
        match started.await {
            Ok(()) => {
                pod_routes.push(config.api_service_ip);
                base_env.extend(crate::apiproxy::service_env(config.api_service_ip, 443));
            }
            Err(e) => warn!(error = %e, "pods get no API access (the kubernetes Service address is not forwarded)"),
        }
    }

    let node_ip = config.node_ip();
    let facts = NodeFacts {
        kubelet_port,
        ..NodeFacts::detect(
            &config.node_name,
            node_ip,
            &cidr.to_string(),
            config.max_pods,
            config.cpu.clone(),
            config.memory.clone(),
        )
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter { controller: "kubelet".into(), instance: Some(config.node_name.clone()) },
    );
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        config: config.clone(),
        programs,
        net: net.clone(),
        ipam: Mutex::new(Ipam::new(cidr)),
        node_ip,
        base_env,
        pod_routes,
        mount_points: Mutex::new(Vec::new()),
        recorder,
        logs,
    });
    if let Some(map) = &config.image_map {
        match skiff_api::image::ImageMap::load(map) {
            Ok(m) => info!(path = %map.display(), entries = m.len(), "image map loaded"),
            Err(e) => warn!(error = %e, "image map unreadable (it is read again for each container start)"),
        }
    }

    let node_cancel = CancellationToken::new();
    let (registered_tx, registered_rx) = tokio::sync::oneshot::channel();
    let node_task = tokio::spawn(node::run(
        client.clone(),
        facts,
        Duration::from_secs(config.heartbeat_secs),
        node_cancel.clone(),
        registered_tx,
    ));

    let mut workers: HashMap<String, PodHandle> = HashMap::new();
    let outcome = tokio::select! {
        r = async {
            let _ = registered_rx.await;
            watch_pods(&ctx, &mut workers).await
        } => r,
        _ = shutdown_signal() => {
            info!("shutting down");
            Ok(())
        }
    };

    // Shutdown: stop every pod locally; no API writes (the control plane may be stopping too).
    node_cancel.cancel();
    for h in workers.values() {
        h.stop.send_replace(Some(Stop::Shutdown));
    }
    let wait = Duration::from_secs(config.shutdown_grace_secs + 3);
    for (uid, h) in workers.drain() {
        if tokio::time::timeout(wait, h.task).await.is_err() {
            warn!(%uid, "pod worker did not finish in time");
        }
    }
    let swept = net.sweep().await;
    if swept > 0 {
        info!(swept, "removed remaining pod namespaces");
    }
    if let Err(e) = net.remove_bridge().await {
        warn!(error = %e, "removing the bridge failed");
    }
    proxy_cancel.cancel();
    kubelet_cancel.cancel();
    crate::sandbox::remove_mount_points(&ctx.mount_points.lock().expect("mount points lock"));
    let _ = node_task.await;
    info!("stopped");
    outcome
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// The grace period for a pod being deleted.
fn deletion_grace(pod: &Pod) -> Duration {
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
        .unwrap_or(30);
    Duration::from_secs(secs.max(0) as u64)
}

fn apply(ctx: &Arc<Ctx>, workers: &mut HashMap<String, PodHandle>, pod: Pod) {
    let Some(uid) = pod.uid() else { return };
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let grace = deletion_grace(&pod);
    let handle = workers.entry(uid).or_insert_with(|| pod::spawn(ctx.clone(), pod.clone()));
    handle.pod.send_replace(pod);
    if deleting {
        let shorter = match *handle.stop.borrow() {
            None => true,
            Some(Stop::Delete { grace: g }) => grace < g,
            Some(_) => false,
        };
        if shorter {
            handle.stop.send_replace(Some(Stop::Delete { grace }));
        }
    }
}

fn gone(workers: &HashMap<String, PodHandle>, uid: &str) {
    if let Some(h) = workers.get(uid) {
        h.stop.send_replace(Some(Stop::Gone));
    }
}

async fn watch_pods(ctx: &Arc<Ctx>, workers: &mut HashMap<String, PodHandle>) -> Result<()> {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let selector = format!("spec.nodeName={}", ctx.config.node_name);
    let mut stream = watcher::watcher(api, watcher::Config::default().fields(&selector)).default_backoff().boxed();
    let mut listed: Option<HashSet<String>> = None;
    info!(%selector, "watching pods");
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(Event::Init) => listed = Some(HashSet::new()),
            Ok(Event::InitApply(pod)) => {
                if let (Some(seen), Some(uid)) = (listed.as_mut(), pod.uid()) {
                    seen.insert(uid);
                }
                apply(ctx, workers, pod);
            }
            Ok(Event::InitDone) => {
                if let Some(seen) = listed.take() {
                    for uid in workers.keys().filter(|u| !seen.contains(*u)) {
                        gone(workers, uid);
                    }
                }
            }
            Ok(Event::Apply(pod)) => apply(ctx, workers, pod),
            Ok(Event::Delete(pod)) => {
                if let Some(uid) = pod.uid() {
                    gone(workers, &uid);
                }
            }
            Err(e) => warn!(error = %e, "pod watch error (retrying)"),
        }
        workers.retain(|_, h| !h.task.is_finished());
    }
    Ok(())
}
