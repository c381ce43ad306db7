//! `skiff-activator serve` (the activator on Kubernetes) and `skiff-activator queue-proxy --port P
//! --upstream HOST:PORT --container-concurrency N` (the sidecar): see `--help`.

use clap::Parser;
use skiff_activator::cli::{Cli, Command};
use skiff_http::telemetry;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.log_format, "info");
    let mut terminate = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        tracing::info!("shutting down: no new connections, draining in-flight requests");
    };
    match cli.command {
        Command::QueueProxy(config) => skiff_activator::queue_proxy::run(*config, shutdown).await?,
        Command::Serve(args) => skiff_activator::cluster::run(args, shutdown).await?,
    }
    Ok(())
}
