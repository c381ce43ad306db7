//! `skiff-activator serve`: the activator on Kubernetes. Revisions and their ready pods come from
//! the EndpointSlices of revision Services (cluster-wide); requests for a revision are held until
//! one of its pods has room, with the same bounds, 503 and 504 as in `skiff up`; the autoscaler
//! in the controller's leader is poked at once when a request arrives for a revision at zero, and
//! told every second what is held ([`autoscaler`]). A revision whose status says it fails for a
//! cause a retry will not fix has its requests answered at once with 503 and the reason
//! ([`failing`]). On shutdown it stops accepting and drains.

pub mod autoscaler;
pub mod failing;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use skiff_api::InferenceServiceResource;
use skiff_dataplane::Plane;
use skiff_dataplane::discovery::sync_revisions;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::probe::Prober;
use skiff_http::ServeLimits;
use tokio::net::TcpListener;

use crate::activator::{Activator, DEFAULT_MAX_PENDING, Limits};
use crate::error::{Error, Result};
use autoscaler::{AutoscalerLink, LinkPoker};

/// How long a request for a revision whose EndpointSlices have not arrived yet waits for them (the
/// router may see a new revision in an InferenceService's status first).
const UNKNOWN_REVISION_WAIT: Duration = Duration::from_secs(10);

/// After SIGTERM, how long the activator keeps serving before it stops accepting: time for the
/// routers to see it leave its EndpointSlice.
const DRAIN_DELAY: Duration = Duration::from_secs(3);

/// Everything `skiff-activator serve` can be told.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Port for requests from the router.
    #[arg(long, default_value_t = 8012)]
    pub port: u16,
    /// Admin listener: `/healthz`, `/readyz` (after the first list of EndpointSlices), `/metrics`.
    #[arg(long, env = "SKIFF_ADMIN_ADDR", default_value = "0.0.0.0:9090")]
    pub admin_addr: SocketAddr,
    /// Namespace of the controller's Lease and Service.
    #[arg(long, env = "POD_NAMESPACE", default_value = "skiff-system")]
    pub namespace: String,
    /// The controller's Service (its leader runs the autoscaler).
    #[arg(long, default_value = "skiff-controller")]
    pub controller_service: String,
    /// The controller's leader Lease.
    #[arg(long, default_value = "skiff-controller")]
    pub lease_name: String,
    /// Requests held per revision before 503.
    #[arg(long, default_value_t = DEFAULT_MAX_PENDING)]
    pub max_pending: usize,
    /// This activator's name in its reports (default: `$POD_NAME`, else the host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// The ServiceAccount token the autoscaler authenticates the activator by.
    #[arg(long, default_value = "/var/run/secrets/kubernetes.io/serviceaccount/token")]
    pub token_file: PathBuf,
}

impl ServeArgs {
    /// The name this activator reports under.
    pub fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map_or_else(|_| "activator".into(), |h| h.trim().to_owned())
        })
    }
}

/// Runs the activator until `shutdown` completes, then drains.
pub async fn run(args: ServeArgs, shutdown: impl Future<Output = ()>) -> Result<()> {
    if args.max_pending == 0 {
        return Err(Error::Config("--max-pending must be at least 1".into()));
    }
    let client =
        kube::Client::try_default().await.map_err(|e| Error::Config(format!("connecting to Kubernetes: {e}")))?;
    let link = AutoscalerLink::new(
        Api::<Lease>::namespaced(client.clone(), &args.namespace),
        Api::<EndpointSlice>::namespaced(client.clone(), &args.namespace),
        args.lease_name.clone(),
        args.controller_service.clone(),
        args.token_file.clone(),
        args.identity(),
    );
    let endpoints = Arc::new(Endpoints::default());
    let limits = Limits {
        max_pending: args.max_pending,
        unknown_revision_wait: UNKNOWN_REVISION_WAIT,
        serve: ServeLimits { drain_delay: DRAIN_DELAY, ..Limits::default().serve },
        ..Limits::default()
    };
    let activator = Activator::new(endpoints.clone(), Arc::new(LinkPoker(link.clone())), limits);
    let plane = Arc::new(Plane::new(endpoints.clone()).with_holder(activator.clone()));
    let synced = Arc::new(AtomicBool::new(false));
    let on_synced = {
        let synced = synced.clone();
        move || synced.store(true, Ordering::Release)
    };
    let prober = Some(Arc::new(Prober::default()));
    let failures = tokio::spawn(failing::follow(Api::<InferenceServiceResource>::all(client.clone()), endpoints));
    let watch = tokio::spawn(sync_revisions(Api::<EndpointSlice>::all(client), plane, prober, on_synced));
    let reports = tokio::spawn(link.report_every_second(activator.clone()));

    let admin = TcpListener::bind(args.admin_addr).await?;
    let draining = Arc::new(AtomicBool::new(false));
    let admin_task = tokio::spawn(skiff_http::serve(
        admin,
        {
            let (activator, synced, draining) = (activator.clone(), synced.clone(), draining.clone());
            move |request: http::Request<hyper::body::Incoming>| {
                let ready = synced.load(Ordering::Acquire) && !draining.load(Ordering::Acquire);
                let activator = activator.clone();
                async move {
                    let not_ready = (!ready).then_some("not ready: EndpointSlices not listed yet, or draining");
                    skiff_http::admin::respond(&request, not_ready, || activator.metrics_text())
                }
            }
        },
        std::future::pending::<()>(),
        ServeLimits::default(),
    ));
    let listener = TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], args.port))).await?;
    let shutdown = async move {
        shutdown.await;
        draining.store(true, Ordering::Release);
    };
    let served = activator.serve(listener, shutdown).await;
    watch.abort();
    failures.abort();
    reports.abort();
    admin_task.abort();
    served
}
