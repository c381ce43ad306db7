//! `skiff-web` on a cluster: the models web app with the Kubernetes API behind it, settings from
//! the environment (see [`skiff_web::config`]), access reviews per user unless `APP_DISABLE_AUTH`
//! (the user header believed only with the front proxy's `APP_PROXY_SECRET`; what it trusts is
//! logged at start-up);
//! the metrics history is sampled from the start, for every revision, by one background task;
//! traffic figures come from Prometheus (`METRICS_SOURCE=prometheus`, the default when
//! `PROMETHEUS_URL` is set) or from the router pods of `SKIFF_ROUTER_SERVICE` (default
//! `skiff-system/skiff-router`).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use skiff_http::ServeLimits;
use skiff_web::access::SubjectAccessReviews;
use skiff_web::config::Settings;
use skiff_web::kube_backend::KubeBackend;
use skiff_web::metrics::prometheus::Prometheus;
use skiff_web::metrics::router_pods::RouterPods;
use skiff_web::metrics::sampler::Sampler;
use skiff_web::{App, Mode, app};
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let settings = Settings::from_env(|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?;
    for (warn, note) in settings.trust_notes() {
        if warn {
            tracing::warn!("{note}");
        } else {
            tracing::info!("{note}");
        }
    }
    let client = kube::Client::try_default().await.context("no Kubernetes API (in-cluster or kubeconfig)")?;
    let backend = Arc::new(KubeBackend::new(client.clone()));
    let access = (!settings.disable_auth).then(|| Arc::new(SubjectAccessReviews::new(client.clone())) as _);
    let prometheus = settings.prometheus().map(Prometheus::new);
    let router = std::env::var("SKIFF_ROUTER_SERVICE").unwrap_or_else(|_| "skiff-system/skiff-router".into());
    let scrape = RouterPods::new(client.clone(), &router).map_err(anyhow::Error::msg)?;
    let sampler = Sampler::new(backend.clone(), Some(Arc::new(scrape)), prometheus);
    tokio::spawn(sampler.clone().run());
    let listen = SocketAddr::from(([0, 0, 0, 0], settings.port));
    let prefix = settings.prefix.clone();
    let state = Arc::new(App { settings, backend, access, sampler, mode: Mode { name: "cluster", router: None } });
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    tracing::info!(%listen, %prefix, "skiff-web serving");
    let mut terminate = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    // Log streams and the live index end when the drain timeout does.
    let limits = ServeLimits { drain_timeout: std::time::Duration::from_secs(5), ..ServeLimits::default() };
    skiff_web::serve(listener, app(state), shutdown, limits).await;
    Ok(())
}
