//! `skiff-server --model-dir DIR [--model-name NAME] [--http-port PORT]`: see `--help`.

use clap::Parser;
use skiff_http::telemetry;
use skiff_server::config::Cli;
use skiff_server::termination;

/// mimalloc: glibc's allocator contends on arena locks between the HTTP and inference threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.config.log_format, "info");
    let termination = cli.config.termination_message_path.clone();
    let result = skiff_server::run(cli.config).await;
    if let (Err(error), Some(path)) = (&result, termination) {
        tracing::error!(%error, "stopping");
        if let Err(e) = termination::write(&path, error) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write the termination message");
        }
    }
    Ok(result?)
}
