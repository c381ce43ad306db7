//! `skiff-fetch URI DIR`: downloads a model into a folder, the arguments of KServe's storage
//! initializer, so it runs as a model pod's init container. Store settings come from KServe's
//! variables ([`skiff_fetch::env`]). It prints one JSON line of what it did; on failure the
//! reason goes to stderr and the termination message, and the exit code tells the kind (2 a
//! bad URI or setting, 3 not found, 4 access denied, 5 a transfer, 6 too large, 7 a bad
//! archive, 8 the local disk).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use skiff_fetch::env::StoreEnv;
use skiff_fetch::{Error, Fetcher};
use tracing_subscriber::EnvFilter;

/// Downloads a model from s3://, gs://, https:// or hf:// into a folder.
#[derive(Debug, Parser)]
#[command(name = "skiff-fetch", version)]
struct Cli {
    /// The model's storageUri.
    uri: String,
    /// The folder to download into (created if missing).
    dir: PathBuf,
    /// Ranges downloaded at once.
    #[arg(long, default_value_t = 8)]
    parallel: usize,
    /// The bound on the whole fetch, in seconds.
    #[arg(long, default_value_t = skiff_fetch::fetcher::DEFAULT_TIMEOUT.as_secs())]
    timeout_secs: u64,
    /// Where the reason of a failure is written (the container's termination message).
    #[arg(long, default_value = "/dev/termination-log")]
    termination_message: PathBuf,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(EnvFilter::from_default_env()).init();
    let cli = Cli::parse();
    match run(&cli).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let message = skiff_fetch::failure_message(&error);
            eprintln!("{message}");
            // The file is there only in a container; elsewhere the message is on stderr alone.
            let _ = std::fs::write(&cli.termination_message, &message);
            ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(1))
        }
    }
}

async fn run(cli: &Cli) -> Result<String, Error> {
    let mut fetcher = Fetcher::new(StoreEnv::from_process()?);
    fetcher.plan.parallel = cli.parallel.max(1);
    fetcher.timeout = Duration::from_secs(cli.timeout_secs);
    let report = fetcher.fetch(&cli.uri, &cli.dir).await?;
    Ok(serde_json::json!({
        "fetched": report.uri,
        "objects": report.objects,
        "bytes": report.bytes,
        "downloaded": report.downloaded,
        "cached": report.cached,
        "seconds": report.seconds,
    })
    .to_string())
}
