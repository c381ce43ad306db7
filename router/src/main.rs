//! `skiff-router`: the ingress on Kubernetes. See `skiff-router --help`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use skiff_api::InferenceServiceResource;
use skiff_dataplane::Plane;
use skiff_dataplane::discovery::{sync_revisions, sync_service};
use skiff_dataplane::endpoints::Endpoints;
use skiff_http::ServeLimits;
use skiff_http::telemetry::{self, LogFormat};
use skiff_router::cluster::follow_routes;
use skiff_router::{DownstreamLimits, Router, RouterConfig};
use tokio::net::TcpListener;

/// Command line of `skiff-router`.
#[derive(Debug, Parser)]
#[command(name = "skiff-router", version, about = "Skiff's ingress: routes InferenceService traffic to revisions")]
struct Args {
    /// Where the proxy listens.
    #[arg(long, env = "SKIFF_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// Admin listener: `/healthz`, `/readyz` (after the first list of every watch), `/metrics`.
    #[arg(long, env = "SKIFF_ADMIN_ADDR", default_value = "0.0.0.0:9090")]
    admin_addr: SocketAddr,
    /// Domain of service hosts, `<name>.<namespace>.<domain>` (a service's `status.url` host routes too).
    #[arg(long, env = "SKIFF_DOMAIN", default_value = "example.com")]
    domain: String,
    /// Namespace of the activator's Service.
    #[arg(long, env = "POD_NAMESPACE", default_value = "skiff-system")]
    namespace: String,
    /// The activator's Service, whose ready pods take requests for revisions without room.
    #[arg(long, default_value = "skiff-activator")]
    activator_service: String,
    /// Proxy worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds in-flight requests may take to finish after SIGTERM.
    #[arg(long, default_value_t = 5)]
    grace_period_secs: u64,
    /// Seconds to keep serving after SIGTERM, readiness off, before the listener closes: time for
    /// the Service's endpoints to drop this pod.
    #[arg(long, default_value_t = 3)]
    drain_delay_secs: u64,
    /// Seconds an answer under way (a gRPC stream, a server-sent event stream) may go with nothing
    /// flowing either way before the router ends it.
    #[arg(long, default_value_t = 60)]
    stream_idle_timeout_secs: u64,
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// The watches that must have listed once before the router is ready.
const WATCHES: usize = 3;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init(args.log_format, "info");
    let client = kube::Client::try_default().await.context("connecting to Kubernetes (KUBECONFIG or in-cluster)")?;
    let config = RouterConfig {
        listen: args.listen,
        domain: args.domain,
        activator: None,
        threads: args.threads,
        grace_period: Duration::from_secs(args.grace_period_secs),
        downstream: DownstreamLimits {
            drain_delay: Duration::from_secs(args.drain_delay_secs),
            stream_idle_timeout: Duration::from_secs(args.stream_idle_timeout_secs),
            ..DownstreamLimits::default()
        },
    };
    let endpoints = Arc::new(Endpoints::default());
    let router = Router::new(config, endpoints.clone()).context("router configuration")?;
    let synced = Arc::new(AtomicUsize::new(0));
    let count = |synced: &Arc<AtomicUsize>| {
        let synced = synced.clone();
        move || {
            synced.fetch_add(1, Ordering::AcqRel);
        }
    };
    tokio::spawn(follow_routes(Api::<InferenceServiceResource>::all(client.clone()), router.clone(), count(&synced)));
    let plane = Arc::new(Plane::new(endpoints));
    tokio::spawn(sync_revisions(Api::<EndpointSlice>::all(client.clone()), plane, None, count(&synced)));
    let activators = router.activators().clone();
    let slices = Api::<EndpointSlice>::namespaced(client, &args.namespace);
    let (service, activators_synced) = (args.activator_service.clone(), count(&synced));
    tokio::spawn(async move { sync_service(slices, &service, activators, activators_synced).await });

    let admin = TcpListener::bind(args.admin_addr).await.with_context(|| format!("admin port {}", args.admin_addr))?;
    let handle = router.start().context("starting the router")?;
    tracing::info!(listen = %handle.listen_addr(), admin = %args.admin_addr, "router started");
    let (stopped, stop_admin) = tokio::sync::oneshot::channel::<()>();
    let draining = handle.draining();
    let admin_task = tokio::spawn(skiff_http::serve(
        admin,
        move |request: http::Request<hyper::body::Incoming>| {
            let (router, synced, draining) = (router.clone(), synced.clone(), draining.clone());
            async move {
                let not_ready = if draining.load(Ordering::Acquire) {
                    Some("draining: shutting down")
                } else if synced.load(Ordering::Acquire) < WATCHES {
                    Some("waiting for the first lists of InferenceServices and EndpointSlices")
                } else {
                    None
                };
                skiff_http::admin::respond(&request, not_ready, || router.metrics_text())
            }
        },
        async move {
            let _ = stop_admin.await;
        },
        ServeLimits { drain_timeout: Duration::from_secs(1), ..ServeLimits::default() },
    ));
    // Pingora drains in-flight requests on SIGTERM and then stops; the handle returns then.
    tokio::task::spawn_blocking(move || handle.wait()).await?;
    let _ = stopped.send(());
    let _ = admin_task.await;
    tracing::info!("router stopped");
    Ok(())
}
