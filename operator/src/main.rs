//! `skiff-controller`: see `skiff-controller --help` and the library documentation.

use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use prometheus_client::registry::Registry;
use skiff_http::telemetry;
use skiff_operator::autoscaler::decisions::Decisions;
use skiff_operator::metrics::Metrics;
use skiff_operator::{Settings, admin, controller};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let settings = Settings::parse();
    settings.validate()?;
    telemetry::init(settings.log_format, "info,kube=warn");
    let mut registry = Registry::with_prefix("skiff_controller");
    let metrics = Arc::new(Metrics::new(&mut registry));
    let gate = admin::AutoscalerGate::default();
    registry.register_collector(Box::new(Decisions(gate.clone())));
    let admin = admin::serve(settings.admin_addr, Arc::new(registry), gate.clone()).await?;
    tracing::info!(%admin, "admin listener (/metrics, /healthz, /readyz)");
    let client = kube::Client::try_default().await.context("connecting to Kubernetes (KUBECONFIG or in-cluster)")?;

    let stop = CancellationToken::new();
    let mut terminate = signal(SignalKind::terminate())?;
    let on_signal = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        tracing::info!("shutting down");
        on_signal.cancel();
    });
    controller::run(client, &settings, metrics, gate, stop).await?;
    Ok(())
}
