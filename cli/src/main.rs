//! `skiff`: the Skiff command line. `skiff serve` runs the embedded model server in this process
//! (the same flags as `skiff-server`); `skiff up` (standalone mode) arrives with the data plane.

use clap::{Parser, Subcommand};
use skiff_server::{ServerConfig, telemetry};

#[derive(Parser)]
#[command(
    name = "skiff",
    version,
    about = "Serverless model serving: KServe's InferenceService without Knative or Istio"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve ONNX models over KServe's V1 and V2 protocols (the same as `skiff-server`).
    Serve(ServerConfig),
}

/// mimalloc: glibc's allocator contends on arena locks between the HTTP and inference threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(config) => {
            telemetry::init(config.log_format);
            skiff_server::run(config).await?;
        }
    }
    Ok(())
}
