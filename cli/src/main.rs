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
mod units;

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
    Up(Box<standalone::UpArgs>),
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

/// Runs the command; a failure is one line on stderr (`skiff: <what>: <why>`, never a backtrace,
/// whatever `RUST_BACKTRACE` says) and exit code 1.
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&anyhow::Error::from(e).context("starting the async runtime")),
    };
    match runtime.block_on(run(cli.command)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Says why the command failed, on one line, and gives exit code 1.
fn fail(error: &anyhow::Error) -> std::process::ExitCode {
    eprintln!("skiff: {}", one_line(error));
    std::process::ExitCode::FAILURE
}

/// An error and its causes as one line, `what: why: root cause` (a cause its parent's message
/// already ends with is said once).
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string().replace('\n', " ");
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Up(args) => {
            telemetry::init_quiet(LogFormat::Text, "info", standalone::QUIET_LOGS);
            standalone::up(*args).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_and_its_causes_are_one_line() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused (os error 111)");
        let error = anyhow::Error::from(io).context("no skiff up answers on 127.0.0.1:1\nis it running?");
        assert_eq!(
            one_line(&error),
            "no skiff up answers on 127.0.0.1:1 is it running?: Connection refused (os error 111)"
        );
        let repeated = anyhow::anyhow!("client error (Connect): tcp connect error");
        assert_eq!(
            one_line(&repeated.context("client error (Connect): tcp connect error")),
            "client error (Connect): tcp connect error"
        );
    }
}
