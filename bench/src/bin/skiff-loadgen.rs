//! `skiff-loadgen --address 127.0.0.1:8080 --path /v2/models/iris/infer --body '{...}' -c 16 -d 5`:
//! POSTs the body over keep-alive connections and prints req/s, p50 and p99.

use std::time::Duration;

use clap::Parser;
use skiff_bench::load::{self, LoadSpec};

#[derive(Parser)]
struct Args {
    /// `host:port` of the server.
    #[arg(long)]
    address: String,
    /// Request path.
    #[arg(long)]
    path: String,
    /// JSON body to POST.
    #[arg(long)]
    body: String,
    /// Concurrent connections.
    #[arg(short, long, default_value_t = 16)]
    connections: usize,
    /// Measured seconds.
    #[arg(short, long, default_value_t = 5)]
    duration: u64,
    /// Warm-up seconds.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let stats = load::run(&LoadSpec {
        address: args.address,
        path: args.path,
        body: args.body.into(),
        connections: args.connections,
        warmup: Duration::from_secs(args.warmup),
        duration: Duration::from_secs(args.duration),
    })
    .await?;
    println!(
        "{:.0} req/s  p50 {:.3} ms  p99 {:.3} ms  errors {}",
        stats.rps(),
        stats.quantile_ms(0.5),
        stats.quantile_ms(0.99),
        stats.errors
    );
    Ok(())
}
