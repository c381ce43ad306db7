//! Standalone mode: `skiff up DIR` runs the whole data plane on one machine — Pingora router,
//! activator, KPA autoscaler, and child processes as replicas (`skiff-server`, or a custom
//! container behind a queue-proxy) — for the InferenceService manifests in DIR, which it watches.
//! `skiff get` shows what it serves.

pub(crate) mod admin;
mod backend;
mod config;
mod container;
mod controller;
mod edit;
pub(crate) mod env;
mod events;
mod failure;
mod folder;
mod graphs;
mod lifecycle;
mod logs;
mod manifests;
pub(crate) mod models;
mod replica;
mod restart;
mod runtimes;
mod signal;
mod source;
pub(crate) mod status;
mod web;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use arc_swap::ArcSwap;
use skiff_activator::{Activator, Limits};
use skiff_api::image::ImageMap;
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::runner::LOCAL_ACTIVATOR;
use skiff_dataplane::{Plane, Runner};
use skiff_router::{Router, RouterConfig};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use admin::Admin;
use backend::LocalProcesses;
use config::UpConfig;
use controller::{Controller, DataPlane};
use events::EventLog;
use folder::ManifestFolder;
use logs::ReplicaLogs;
use replica::Programs;
use signal::Signal;
use skiff_web::backend::rfc3339;
use skiff_web::config::{AllowedHosts, Settings};
use skiff_web::metrics::prometheus::Prometheus;
use skiff_web::metrics::sampler::Sampler;
use skiff_web::{App, Mode};
use web::{AdminMetrics, FolderBackend};

/// `skiff up` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct UpArgs {
    /// Folder of InferenceService manifests (watched).
    pub dir: PathBuf,
    /// Port of the router (the inference endpoint).
    #[arg(long, default_value_t = 8080)]
    pub http_port: u16,
    /// Address the router listens on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// The admin endpoint (`skiff get`, `skiff load`, the models web app): a loopback address, or
    /// a port on 127.0.0.1; port 0 picks a free one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9091", value_parser = admin::parse_addr,
          alias = "admin-port")]
    pub admin: SocketAddr,
    /// Settings file: domain, Knative `config-autoscaler` keys, activator limits.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The `skiff-server` binary replicas run (default: next to this executable).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// ONNX Runtime's shared library; by default next to this binary, or where `scripts/setup.sh`
    /// installs it in the checkout this binary was built in.
    #[arg(long, env = "ORT_DYLIB_PATH")]
    pub ort_dylib: Option<PathBuf>,
    /// The `skiff-activator` binary whose queue-proxy mode fronts custom containers (default: next
    /// to this executable).
    #[arg(long)]
    pub queue_proxy_bin: Option<PathBuf>,
    /// Image map for custom containers and runtimes without a `command` (JSON or YAML):
    /// `image: /path/to/program` or `image: [program, args...]`;
    /// its entries replace the built-in ones (KServe's `sklearnserver`, `xgbserver`, `lgbserver` as
    /// `python3 -m <module>`).
    #[arg(long, env = "SKIFF_IMAGE_MAP")]
    pub image_map: Option<PathBuf>,
    /// A ClusterServingRuntime manifest (YAML, as `kubectl apply -f` takes it) that models may run
    /// on besides KServe's defaults (repeatable), e.g. examples/runtimes/llama-cpp-server.yaml.
    #[arg(long = "runtime", value_name = "FILE")]
    pub runtimes: Vec<PathBuf>,
    /// A name the models web app answers to as `Host`, besides 127.0.0.1, localhost and [::1]
    /// (repeatable); any other name gets 421, so that a page cannot reach the app by rebinding its
    /// own name to this machine.
    #[arg(long = "web-host", value_name = "NAME")]
    pub web_hosts: Vec<String>,
    /// Lets the models web app create InferenceServices with custom containers, which run as
    /// commands on this machine (off: a page that reached the app could run any).
    #[arg(long)]
    pub web_allow_containers: bool,
    /// The model cache's folder: a model at a store (s3://, gs://, https://, hf://) is fetched
    /// into it once and every replica reads it there (default: `$XDG_CACHE_HOME/skiff/models`).
    #[arg(long, env = "SKIFF_MODEL_CACHE")]
    pub model_cache: Option<PathBuf>,
    /// The model cache's bound (bytes, or `500M`, `50G`): past it, least recently used models no
    /// replica holds are evicted.
    #[arg(long, default_value = "50G", value_parser = crate::units::parse_size)]
    pub model_cache_limit: u64,
    /// Refuse a manifest with a field KServe's InferenceService does not have (a misspelt
    /// `minReplica`), as `kubectl apply --validate=strict` does; without it, such a field is a warning.
    #[arg(long)]
    pub strict: bool,
}

/// `skiff get` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct GetArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// The admin endpoint of the running `skiff up`: an address, or a port on 127.0.0.1.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9091", value_parser = admin::parse_addr,
          alias = "admin-port")]
    pub admin: SocketAddr,
}

/// `skiff get -o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns.
    Table,
    /// The status document.
    Json,
}

/// Log directives `skiff up` adds unless `RUST_LOG` names their targets: Pingora's own steps
/// (server starting, each stage of a shutdown) and the drain of its in-process servers (the
/// activator, the admin endpoint) say nothing its user acts on; its own line says it drains.
pub const QUIET_LOGS: &[&str] = &["pingora_core=warn", "skiff_http::serve=warn"];

/// How often the activator's held requests are reported to the autoscaler (as in a cluster).
const HELD_REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// Reports the requests the activator holds to the autoscaler, every second, until dropped.
async fn report_held(activator: Arc<Activator>, autoscaler: Arc<Runner<LocalProcesses, Signal>>) {
    let mut interval = tokio::time::interval(HELD_REPORT_INTERVAL);
    loop {
        interval.tick().await;
        for (revision, held) in activator.held() {
            autoscaler.report_held(&revision, LOCAL_ACTIVATOR, held);
        }
    }
}

/// The models web app over the folder: auth off (the admin port is on loopback), only `hosts` (the
/// loopback names and `--web-host`) as `Host`, custom containers only with
/// `--web-allow-containers`, every revision's metrics sampled from the start by one background
/// task, traffic from the router unless `PROMETHEUS_URL` names a Prometheus that scrapes
/// `/metrics` (and `METRICS_SOURCE` is not `app`).
fn web_app(
    manifests: Arc<ManifestFolder>,
    admin: Arc<Admin>,
    logs: Arc<ReplicaLogs>,
    events: Arc<EventLog>,
    router: SocketAddr,
    hosts: AllowedHosts,
    allow_containers: bool,
) -> anyhow::Result<axum::Router> {
    let mut settings = Settings::standalone();
    settings.allowed_hosts = hosts;
    let from_env = env::web_settings().map_err(|e| anyhow::anyhow!("models web app: {e}"))?;
    (settings.prometheus_url, settings.metrics_source) = (from_env.prometheus_url, from_env.metrics_source);
    let folder = Arc::new(FolderBackend { manifests, admin: admin.clone(), logs, events, allow_containers });
    let prometheus = settings.prometheus().map(Prometheus::new);
    let sampler = Sampler::new(folder.clone(), Some(Arc::new(AdminMetrics(admin))), prometheus);
    tokio::spawn(sampler.clone().run());
    let mode = Mode { name: "skiff up", router: Some(router.to_string()) };
    Ok(skiff_web::app(Arc::new(App { settings, backend: folder, access: None, sampler, mode })))
}

/// Runs standalone mode until SIGTERM or Ctrl-C.
pub async fn up(args: UpArgs) -> anyhow::Result<()> {
    folder_exists(&args.dir)?;
    anyhow::ensure!(
        args.admin.ip().is_loopback(),
        "--admin {}: the admin endpoint serves the models web app without sign-in, so it listens on a \
         loopback address only",
        args.admin
    );
    let mut config = UpConfig::load(args.config.as_deref()).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.image_map {
        config.images = config.images.overridden_by(ImageMap::load(path)?);
    }
    for path in &args.runtimes {
        config.add_runtime(path).map_err(|e| anyhow::anyhow!("--runtime {e}"))?;
    }
    config.strict = args.strict;
    let server_bin = match args.server_bin {
        Some(bin) => bin,
        None => std::env::current_exe()?.with_file_name("skiff-server"),
    };
    let queue_proxy = match args.queue_proxy_bin {
        Some(bin) => bin,
        None => std::env::current_exe()?.with_file_name("skiff-activator"),
    };
    anyhow::ensure!(
        server_bin.is_file(),
        "replica binary {} not found (build it, or pass --server-bin)",
        server_bin.display()
    );
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;

    let endpoints = Arc::new(Endpoints::default());
    let ort_dylib = skiff_server::onnxruntime::locate(args.ort_dylib)?;
    let model_cache = args.model_cache.clone().unwrap_or_else(env::model_cache_dir);
    let models = models::ModelStore::open(&model_cache, args.model_cache_limit)
        .with_context(|| format!("the model cache at {}", model_cache.display()))?;
    // The models' cached forms (skiff-server's `--ort-cache-dir`) beside the cache's models,
    // unless SKIFF_ORT_CACHE_DIR says where (`off`: none).
    let ort_cache = std::env::var_os("SKIFF_ORT_CACHE_DIR").map_or_else(|| model_cache.join("ort"), PathBuf::from);
    let programs = Programs { server: server_bin, queue_proxy, ort_dylib, ort_cache };
    let backend = LocalProcesses::new(programs, models, config.restart_backoff);
    let signal = Arc::new(Signal::new(endpoints.clone()));
    let autoscaler = Runner::new(backend.clone(), signal, config.autoscaler.tick_interval);
    let limits = Limits { max_pending: config.max_pending, ..Limits::default() };
    let activator = Activator::new(endpoints.clone(), autoscaler.clone(), limits);
    let plane = Plane::new(endpoints.clone()).with_holder(activator.clone()).with_scaler(autoscaler.clone());

    let activator_listener = TcpListener::bind("127.0.0.1:0").await?;
    let activator_addr = activator_listener.local_addr()?;
    let (stop_activator, activator_stopped) = tokio::sync::oneshot::channel::<()>();
    let activator_task = tokio::spawn({
        let activator = activator.clone();
        async move {
            activator
                .serve(activator_listener, async {
                    let _ = activator_stopped.await;
                })
                .await
        }
    });

    let router_config = RouterConfig {
        listen: SocketAddr::new(args.bind, args.http_port),
        domain: config.domain.clone(),
        activator: Some(activator_addr),
        // Half the cores: the replicas and the clients of a load test on the same machine need the rest.
        threads: std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1)),
        grace_period: Duration::from_secs(1),
        ..RouterConfig::default()
    };
    let router = Arc::new(Router::new(router_config, endpoints).context("router configuration")?);
    router.set_poker(Arc::new(GraphPoker(autoscaler.clone())));
    let router_handle = router.start().context("starting the router")?;
    let listen = router_handle.listen_addr();

    let admin = Arc::new(Admin {
        status: ArcSwap::from_pointee(Default::default()),
        metrics: Box::new({
            let (router, activator) = (router.clone(), activator.clone());
            move || admin::exposition(&[router.metrics_text(), activator.metrics_text()])
        }),
        journal: Box::new({
            let autoscaler = autoscaler.clone();
            move |revision| autoscaler.journal(revision)
        }),
    });
    let admin_listener = TcpListener::bind(args.admin)
        .await
        .with_context(|| format!("--admin {}: cannot listen there (another skiff up?)", args.admin))?;
    let admin_addr = admin_listener.local_addr()?;
    let events = Arc::new(EventLog::default());
    config.own_listeners = vec![("router", listen), ("admin endpoint", admin_addr), ("activator", activator_addr)];
    let manifests = Arc::new(ManifestFolder::new(args.dir.clone(), config.clone()));
    // The whole admin port answers only these names: a page cannot read /status by DNS rebinding.
    let hosts = AllowedHosts::loopback_and(&args.web_hosts).map_err(|e| anyhow::anyhow!("--web-host: {e}"))?;
    let host_only = axum::middleware::from_fn_with_state(Arc::new(hosts.clone()), skiff_web::security::host_only);
    let web = web_app(
        manifests.clone(),
        admin.clone(),
        backend.logs.clone(),
        events.clone(),
        listen,
        hosts,
        args.web_allow_containers,
    )?;
    tokio::spawn(admin::serve(admin_listener, admin::routes(admin.clone(), web).layer(host_only)));
    let autoscaler_task = tokio::spawn(autoscaler.clone().run());
    let report_task = tokio::spawn(report_held(activator.clone(), autoscaler));

    let router_addr = match listen.ip() {
        ip if ip.is_unspecified() => SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), listen.port()),
        _ => listen,
    };
    let plane = DataPlane { plane, backend: backend.clone(), activator, router, router_addr };
    let mut controller = Controller::new(manifests, config.clone(), plane);
    println!(
        "skiff up: serving {} on http://{listen} (admin http://{admin_addr}; models web app \
         http://{admin_addr}/models/; status: skiff get --admin {admin_addr}; stop: Ctrl-C or kill {})",
        args.dir.display(),
        std::process::id()
    );
    let story = lifecycle::Story::for_stdout();
    let mut announced = std::collections::BTreeSet::new();
    let mut ticker = tokio::time::interval(config.reconcile_interval());
    let stopped_by = loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = terminate.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
        }
        controller.reconcile();
        let status = controller.status();
        for service in status.services.iter().filter(|s| s.ready) {
            if announced.insert(service.name.clone()) {
                println!(
                    "{} is ready: {}\n  curl -s http://{listen}/v2/models/{}   (or -H 'Host: {}.{}.{}')",
                    service.name, service.url, service.name, service.name, service.namespace, config.domain
                );
            }
        }
        let changes = events::diff(&admin.status.load(), &status, &rfc3339(SystemTime::now()));
        story.tell(&changes);
        events.record(changes);
        admin.status.store(Arc::new(status));
    };
    println!("skiff up: {stopped_by} received: draining in-flight requests, then stopping the replicas");
    backend.shut_down();
    // Pingora's graceful stop blocks its caller for the grace period.
    let _ = tokio::task::spawn_blocking(move || router_handle.shutdown()).await;
    let _ = stop_activator.send(());
    let _ = activator_task.await;
    autoscaler_task.abort();
    report_task.abort();
    controller.shutdown();
    if tokio::time::timeout(Duration::from_secs(35), backend.drained()).await.is_err() {
        tracing::warn!("replicas still draining after 35 s; stopping them");
    }
    Ok(())
}

/// Refuses a manifest folder that is not there (rather than watching nothing).
fn folder_exists(dir: &std::path::Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => {
            anyhow::bail!("{}: not a folder (skiff up serves a folder of InferenceService manifests)", dir.display())
        }
        Err(e) => Err(anyhow::Error::from(e).context(format!("the manifest folder {}", dir.display()))),
    }
}

/// Prints what a running `skiff up` serves.
pub async fn get(args: GetArgs) -> anyhow::Result<()> {
    let status = admin::fetch_status(args.admin).await?;
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&status)?),
        Output::Table => print!("{}", status::table(&status)),
    }
    Ok(())
}

/// Wakes a revision at zero for an InferenceGraph that is about to call it: the autoscaler's
/// poke, as from an activator of its own (`graph`), so the activator's own held count stays its own.
struct GraphPoker<B: skiff_dataplane::ReplicaBackend, S: skiff_dataplane::MetricSource>(Arc<Runner<B, S>>);

impl<B: skiff_dataplane::ReplicaBackend, S: skiff_dataplane::MetricSource> skiff_dataplane::Poker for GraphPoker<B, S> {
    fn poke(&self, revision: &skiff_dataplane::RevisionKey, held: usize) {
        self.0.poke(revision, "graph", held);
    }
}
