//! `skiff-server`: Skiff's embedded model server. It serves ONNX models through ONNX Runtime
//! (`ort`, loaded at run time) behind KServe's V1 and V2 inference protocols (REST with the
//! binary tensor extension, and gRPC on the same port) and Triton's extensions (model
//! configuration, statistics, repository index, streamed inference), with a container-concurrency
//! gate, optional dynamic batching, Prometheus metrics and a graceful drain.
//!
//! The layout is a pure core with a thin I/O shell: [`tensor`], [`codec`], [`triton`] and the
//! model signature checks are plain functions; [`model`] owns ONNX Runtime and its threads; [`app`]
//! holds what both protocols share (the state and the inference core); [`http`] (the REST routes)
//! and [`grpc`] (the gRPC service) build on it, never on each other, and [`serve`] sends each
//! request on the one port to one or the other.

pub mod admission;
pub mod app;
pub mod codec;
pub mod config;
pub mod error;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod model;
pub mod onnxruntime;
pub mod proto;
pub mod tensor;
pub mod termination;
pub mod triton;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Either;
use skiff_http::ServeLimits;
use skiff_http::body::{BodyLimits, Budget};
use skiff_http::logger::Logger;
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

pub use config::ServerConfig;
pub use error::{Error, Result};

use admission::Admission;
use app::App;
use metrics::Metrics;
use model::Models;

/// Runs the server until SIGTERM or Ctrl-C, then drains. Listens at once (live), loads the models
/// in the background and becomes ready when all are loaded; a model that fails to load ends the
/// process with an error.
pub async fn run(config: ServerConfig) -> Result<()> {
    config.validate()?;
    let mut terminate = signal(SignalKind::terminate())?;
    let sources = model::discover(&config.model_dir()?, config.model_name.as_deref())?;
    let dylib = config.ort_dylib()?;
    let ort_started = std::time::Instant::now();
    let env = ort::init_from(&dylib)
        .map_err(|e| Error::Config(format!("cannot load ONNX Runtime: {e}")))?
        .with_name("skiff-server")
        .build()
        .map_err(|e| Error::Config(format!("cannot start ONNX Runtime: {e}")))?;
    let ort_millis = ort_started.elapsed().as_secs_f64() * 1e3;

    let metrics = Metrics::default();
    let admission =
        Admission::new(config.admission.container_concurrency, config.admission.max_queued(), metrics.queued());
    let limits = config.serve_limits();
    let body = BodyLimits {
        max_bytes: config.max_body_bytes,
        timeout: limits.body_timeout,
        budgets: vec![Budget::new("the server", config.max_buffered_bytes)],
    };
    let logger = config.logger.config().map_err(Error::Config)?.map(|c| Logger::start(c, metrics.logger.clone()));
    let app = Arc::new(App::new(Models::new(sources), admission, metrics, body, logger));

    let listener = TcpListener::bind(SocketAddr::new(config.bind, config.http_port)).await?;
    tracing::info!(
        address = %listener.local_addr()?,
        models = ?app.models.names(),
        ort_millis = format!("{ort_millis:.1}"),
        "listening"
    );

    let mut options = config.load_options();
    options.compiled = config.ort_cache_dir().map(|dir| {
        let runtime = model::compiled::runtime_label(&dylib, ort::info());
        model::compiled::CompiledCache::new(dir, model::compiled::Key::current(&runtime))
    });
    let loader = tokio::task::spawn_blocking({
        let app = app.clone();
        let options = options.clone();
        move || app.models.load_all(&env, &options, &app.metrics)
    });
    // Whether cached forms are being finished: a shutdown waits for them (up to the drain
    // timeout), so that a replica scaled to zero right after its first start still leaves one.
    let (finishing, mut finished) = tokio::sync::watch::channel(false);
    let loaded = async move {
        let pending = loader.await.map_err(|e| Error::Config(format!("model loading panicked: {e}")))??;
        tracing::info!("ready: every model is loaded");
        if !pending.is_empty() {
            // After readiness: the first answers do not wait for the disk.
            finishing.send_replace(true);
            tokio::task::spawn_blocking(move || {
                model::finish_cached_forms(&options, pending);
                finishing.send_replace(false);
            });
        }
        std::future::pending::<Result<()>>().await
    };
    let drain_timeout = limits.drain_timeout;
    let shutdown = async {
        tokio::select! {
            _ = terminate.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        tracing::info!("shutting down: no new connections, draining in-flight requests");
    };
    let result = tokio::select! {
        () = serve(listener, app, shutdown, limits) => Ok(()),
        failed = loaded => failed,
    };
    if *finished.borrow() {
        tracing::info!("waiting for the cached forms to be written");
        let _ = tokio::time::timeout(drain_timeout, finished.wait_for(|busy| !busy)).await;
    }
    result
}

/// Serves `app` on `listener` under `limits` until `shutdown` completes, then turns readiness
/// off, serves on for the drain delay (so that load balancers stop sending first), stops
/// accepting, lets in-flight requests finish (closing idle keep-alive connections at once) and
/// returns; connections still busy after the drain timeout are abandoned. A request whose content
/// type is `application/grpc` goes to [`grpc::handle`], any other to [`http::handle`].
pub async fn serve(listener: TcpListener, app: Arc<App>, shutdown: impl Future<Output = ()>, limits: ServeLimits) {
    let draining = app.clone();
    let shutdown = async move {
        shutdown.await;
        draining.start_draining();
    };
    let handler = move |request: ::http::Request<hyper::body::Incoming>| {
        let app = app.clone();
        async move {
            if skiff_http::grpc::is_grpc(request.headers()) {
                grpc::handle(app, request).await.map(Either::Right)
            } else {
                http::handle(app, request).await.map(Either::Left)
            }
        }
    };
    skiff_http::serve(listener, handler, shutdown, limits).await;
}
