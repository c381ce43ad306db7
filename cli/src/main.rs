//! `skiff`: the Skiff command line.
//!
//! - `skiff up DIR`: standalone mode — the whole data plane on one machine for the InferenceService
//!   manifests in DIR (router, activator, autoscaler, `skiff-server` replicas), watching DIR.
//! - `skiff get [-o json]`: what a running `skiff up` serves, like `kubectl get isvc`.
//! - `skiff serve`: the embedded model server in this process (the same flags as `skiff-server`).
//! - `skiff load URL | --model NAME`: load that knows about scale to zero (cold starts, phases, HTML report).
//! - `skiff cache ls | prune`: the model cache `skiff up` fetches models into.

mod cache;
mod load;
mod standalone;

use clap::{Parser, Subcommand};
use skiff_http::telemetry;
use skiff_server::ServerConfig;
use skiff_server::config::LogFormat;

/// mimalloc: glibc's allocator contends on arena locks between the HTTP and inference threads.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Run the data plane for a folder of InferenceService manifests (standalone mode).
    Up(standalone::UpArgs),
    /// Show what a running `skiff up` serves.
    Get(standalone::GetArgs),
    /// Serve ONNX models over KServe's V1 and V2 protocols (the same as `skiff-server`).
    Serve(Box<ServerConfig>),
    /// Load a service and report cold starts, latency per phase and errors (scale-to-zero aware).
    Load(Box<load::LoadArgs>),
    /// Show or trim the model cache `skiff up` fetches models into.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Up(args) => {
            telemetry::init(LogFormat::Text, "info");
            standalone::up(args).await
        }
        Command::Get(args) => standalone::get(args).await,
        Command::Cache(command) => cache::run(command),
        Command::Serve(config) => {
            telemetry::init(config.log_format, "info");
            skiff_server::run(*config).await?;
            Ok(())
        }
        Command::Load(args) => match load::run(*args).await? {
            0 => Ok(()),
            code => std::process::exit(code),
        },
    }
}
