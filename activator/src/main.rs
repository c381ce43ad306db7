//! `skiff-activator serve` (the activator on Kubernetes) and `skiff-activator queue-proxy --port P
//! --upstream HOST:PORT --container-concurrency N` (the sidecar): see `--help`.

use clap::Parser;
use skiff_activator::cli::{Cli, Command, LogFormat};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
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
