//! `skiff-activator`'s command line, as its `main` parses it: `serve` (the activator on
//! Kubernetes) or `queue-proxy` (the sidecar), with the log format for either. Here rather than in
//! `main` so that the queue-proxy's argument builder (`skiff_api::serving::QueueProxyArgs`) is
//! tested against this very parser (`tests/args.rs`).

use clap::{Parser, Subcommand};

use crate::QueueProxyConfig;
use crate::cluster::ServeArgs;

/// Everything `skiff-activator` can be told.
#[derive(Debug, Parser)]
#[command(name = "skiff-activator", version, about = "Skiff's activator and queue-proxy")]
pub struct Cli {
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// What `skiff-activator` runs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The activator on Kubernetes: holds requests for revisions without ready capacity.
    Serve(ServeArgs),
    /// Sidecar in front of a custom container: concurrency limit, bounded queue, metrics, drain.
    QueueProxy(Box<QueueProxyConfig>),
}

pub use skiff_http::telemetry::LogFormat;
