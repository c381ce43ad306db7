//! `skiff-model-cache`: the node cache of a cluster (the DaemonSet `skiff-model-cache`, in the pod
//! network behind its node-local Service, with the node's cache folder as a hostPath). It owns a
//! [`skiff_fetch::Cache`] and serves it to the model pods' init containers
//! ([`skiff_fetch::node::server`]). With `--own-root UID:GID` it only gives the cache's folder to
//! that user and exits: the DaemonSet's init step, the one part that runs as root.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use skiff_fetch::Cache;
use skiff_fetch::node::server::{self, Settings};
use tracing_subscriber::EnvFilter;

/// Serves the node's model cache to the model pods' init containers.
#[derive(Debug, Parser)]
#[command(name = "skiff-model-cache", version)]
struct Cli {
    /// The address to listen on (the node's IP and the cache's port on a cluster).
    #[arg(long, env = "SKIFF_MODEL_CACHE_LISTEN", default_value = "127.0.0.1:8095")]
    listen: SocketAddr,
    /// The cache's folder on the node.
    #[arg(long, env = "SKIFF_MODEL_CACHE_ROOT", default_value = "/var/lib/skiff/model-cache")]
    root: PathBuf,
    /// The cache's bound in bytes: least recently used models not in use are evicted beyond it.
    #[arg(long, env = "SKIFF_MODEL_CACHE_LIMIT_BYTES", default_value_t = skiff_fetch::cache::DEFAULT_LIMIT)]
    limit_bytes: u64,
    /// Ranges downloaded at once.
    #[arg(long, default_value_t = 8)]
    parallel: usize,
    /// The bound on one fetch, in seconds.
    #[arg(long, default_value_t = skiff_fetch::fetcher::DEFAULT_TIMEOUT.as_secs())]
    timeout_secs: u64,
    /// How long a caller's ticket holds a model after its last read, in seconds.
    #[arg(long, default_value_t = 600)]
    ticket_ttl_secs: u64,
    /// Reach stores on loopback and link-local addresses for callers (tests on one machine only).
    #[arg(long)]
    allow_loopback: bool,
    /// Give the cache's folder and everything in it to UID:GID (links themselves, never what they
    /// point at), then exit: the init step that lets the cache run as that user.
    #[arg(long, value_name = "UID:GID", value_parser = owner)]
    own_root: Option<(u32, u32)>,
}

/// `UID:GID` as numbers.
fn owner(text: &str) -> Result<(u32, u32), String> {
    let (uid, gid) = text.split_once(':').ok_or("UID:GID, e.g. 65532:65532")?;
    let number = |n: &str| n.parse::<u32>().map_err(|_| format!("{n:?} is not a numeric id (UID:GID)"));
    Ok((number(uid)?, number(gid)?))
}

/// Gives `root` (created if missing) and every entry under it to `uid`:`gid`, skipping those it
/// already has; links are changed themselves and never followed. Returns how many changed.
fn own(root: &Path, uid: u32, gid: u32) -> anyhow::Result<usize> {
    use std::os::unix::fs::{MetadataExt, lchown};
    std::fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
    let mut changed = 0;
    let mut pending = vec![root.to_owned()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        if meta.uid() != uid || meta.gid() != gid {
            lchown(&path, Some(uid), Some(gid)).with_context(|| format!("giving {} to {uid}:{gid}", path.display()))?;
            changed += 1;
        }
        if meta.is_dir() {
            for item in std::fs::read_dir(&path).with_context(|| format!("listing {}", path.display()))? {
                pending.push(item.with_context(|| format!("listing {}", path.display()))?.path());
            }
        }
    }
    Ok(changed)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter).init();
    let cli = Cli::parse();
    if let Some((uid, gid)) = cli.own_root {
        let changed = own(&cli.root, uid, gid)?;
        eprintln!("skiff-model-cache: {} belongs to {uid}:{gid} ({changed} entries changed)", cli.root.display());
        return Ok(());
    }
    anyhow::ensure!(cli.limit_bytes > 0, "--limit-bytes must be above 0");
    let cache = Cache::open(&cli.root, cli.limit_bytes)?;
    let mut settings = Settings {
        timeout: Duration::from_secs(cli.timeout_secs),
        ticket_ttl: Duration::from_secs(cli.ticket_ttl_secs),
        allow_loopback: cli.allow_loopback,
        ..Settings::default()
    };
    settings.plan.parallel = cli.parallel.max(1);
    let listener =
        tokio::net::TcpListener::bind(cli.listen).await.with_context(|| format!("listening on {}", cli.listen))?;
    // The line tests and operators read for the address (port 0 picks a free one).
    eprintln!("skiff-model-cache listening on {} (cache {})", listener.local_addr()?, cli.root.display());
    server::serve(listener, cache, settings).await?;
    Ok(())
}
