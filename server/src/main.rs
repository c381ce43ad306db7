//! `skiff-server --model-dir DIR [--model-name NAME] [--http-port PORT]`: see `--help`.

use clap::Parser;
use skiff_server::{ServerConfig, telemetry};

#[derive(Parser)]
#[command(name = "skiff-server", version, about = "Serve ONNX models over KServe's V1 and V2 inference protocols")]
struct Cli {
    #[command(flatten)]
    config: ServerConfig,
}

/// mimalloc: glibc's allocator contends on arena locks between the HTTP and inference threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.config.log_format);
    skiff_server::run(cli.config).await?;
    Ok(())
}
