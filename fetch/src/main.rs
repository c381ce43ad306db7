//! `skiff-fetch URI DIR`: downloads a model into a folder, the arguments of KServe's storage
//! initializer, so it runs as a model pod's init container. Store settings come from KServe's
//! variables ([`skiff_fetch::env`]). It prints one JSON line of what it did; on failure the
//! reason goes to stderr and the termination message, and the exit code tells the kind (2 a
//! bad URI or setting, 3 not found, 4 access denied, 5 a transfer, 6 too large, 7 a bad
//! archive, 8 the local disk). With `--node-cache URL` it asks the node's cache
//! (`skiff-model-cache`) first and copies the model from it; when the node cache does not answer
//! (or fails on its side) it says so on stderr and fetches directly.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use skiff_fetch::env::StoreEnv;
use skiff_fetch::node::client::{self, Outcome};
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
    /// The node cache's base URL (its node-local Service in a model pod,
    /// `http://skiff-model-cache.skiff-node.svc.cluster.local:8095`): the model is copied
    /// from it, fetched there first when it has not got it.
    #[arg(long)]
    node_cache: Option<String>,
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
            let message = skiff_fetch::failure_message(&cli.uri, &error);
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
    // Read once: a node cache is sent the text, and reads it once on its side.
    let uri = skiff_fetch::uri::store(&cli.uri)?;
    let (report, via) = match cli.node_cache.as_deref() {
        Some(node) if std::env::var_os("GOOGLE_APPLICATION_CREDENTIALS").is_some() => {
            eprintln!(
                "skiff-fetch: a key file (GOOGLE_APPLICATION_CREDENTIALS) is not sent to the node cache {node}: fetching directly"
            );
            (fetcher.fetch(&uri, &cli.dir).await?, "direct")
        }
        Some(node) => {
            let env = client::forwarded_env(|name| std::env::var(name).ok());
            match client::fetch(node, &cli.uri, env, &cli.dir, fetcher.timeout).await {
                Ok(report) => (report, "node-cache"),
                Err(Outcome::Failed(error)) => return Err(error),
                Err(Outcome::Unavailable(reason)) => {
                    eprintln!(
                        "skiff-fetch: the node cache {node} did not give the model ({reason}): fetching directly"
                    );
                    (fetcher.fetch(&uri, &cli.dir).await?, "direct")
                }
            }
        }
        None => (fetcher.fetch(&uri, &cli.dir).await?, "direct"),
    };
    Ok(serde_json::json!({
        "fetched": report.uri,
        "objects": report.objects,
        "bytes": report.bytes,
        "downloaded": report.downloaded,
        "cached": report.cached,
        "seconds": report.seconds,
        "via": via,
    })
    .to_string())
}
