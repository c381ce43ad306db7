//! `bench-server`: V2 infer on the iris classifier at 1, 16 and 64 keep-alive connections against,
//! one after another in the same run, `skiff-server`, KServe's Python model server, MLServer and a
//! bare hyper server; prints req/s, p50, p99, memory and ratios as a Markdown table.
//!
//! Run from the repository root after `scripts/setup.sh` and `bench/peers/setup.sh`:
//! `target/release/bench-server` (see `--help`). Peers whose set-up is missing are skipped with a note.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use clap::Parser;
use skiff_bench::IRIS_V2_BODY;
use skiff_bench::load::{self, LoadSpec};
use skiff_bench::peer::{Peer, free_port};
use skiff_bench::report::{self, Row};

const PATH: &str = "/v2/models/iris/infer";

#[derive(Parser)]
struct Args {
    /// Connection counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    connections: Vec<usize>,
    /// Measured seconds per cell.
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Warm-up seconds per cell.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// Peers to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "skiff-server,kserve,mlserver,hyper-baseline")]
    peers: Vec<String>,
    /// The classifier's folder.
    #[arg(long, default_value = "examples/models/iris")]
    model_dir: PathBuf,
    /// Where peer logs go.
    #[arg(long, default_value = "target/bench-logs")]
    logs: PathBuf,
}

/// The command that starts `peer` on `port`, or why it cannot run here.
fn command(peer: &str, port: u16, args: &Args) -> Result<(Command, &'static str), String> {
    let bin_dir = std::env::current_exe().map_err(|e| e.to_string())?.parent().unwrap().to_path_buf();
    let model = args.model_dir.display().to_string();
    let venv = |name: &str| {
        let python = PathBuf::from(format!(".bench/{name}-venv/bin/python"));
        if python.exists() { Ok(()) } else { Err(format!("{} is missing: run bench/peers/setup.sh", python.display())) }
    };
    Ok(match peer {
        "skiff-server" => {
            let mut c = Command::new(bin_dir.join("skiff-server"));
            c.args(["--model-dir", &model, "--bind", "127.0.0.1", "--http-port", &port.to_string()]);
            (c, "/v2/health/ready")
        }
        "kserve" => {
            venv("kserve")?;
            let mut c = Command::new("bash");
            c.args(["bench/peers/run_kserve.sh", &port.to_string(), &model]);
            (c, "/v2/health/ready")
        }
        "mlserver" => {
            venv("mlserver")?;
            let mut c = Command::new("bash");
            c.args(["bench/peers/run_mlserver.sh", &port.to_string(), &model]);
            (c, "/v2/health/ready")
        }
        "hyper-baseline" => {
            let mut c = Command::new(bin_dir.join("skiff-hello"));
            c.args(["--port", &port.to_string()]);
            (c, "/")
        }
        other => return Err(format!("unknown peer {other}")),
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.logs)?;
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for name in &args.peers {
        let port = free_port()?;
        let (command, ready_path) = match command(name, port, &args) {
            Ok(c) => c,
            Err(why) => {
                notes.push(format!("{name}: skipped ({why})"));
                continue;
            }
        };
        let log = args.logs.join(format!("{name}.log"));
        let peer = match Peer::start(name, command, port, ready_path, &log, Duration::from_secs(120)).await {
            Ok(peer) => peer,
            Err(e) => {
                notes.push(format!("{name}: skipped ({e})"));
                continue;
            }
        };
        eprintln!("{name}: ready in {:.0} ms", peer.startup.as_secs_f64() * 1000.0);
        for &connections in &args.connections {
            let spec = LoadSpec {
                address: peer.address.clone(),
                path: PATH.to_owned(),
                body: IRIS_V2_BODY.into(),
                connections,
                warmup: Duration::from_secs(args.warmup),
                duration: Duration::from_secs(args.duration),
            };
            let stats = load::run(&spec).await?;
            eprintln!("{name} @ {connections}: {:.0} req/s, p50 {:.3} ms", stats.rps(), stats.quantile_ms(0.5));
            rows.push(Row { peer: name.clone(), connections, stats });
        }
        notes.push(format!(
            "{name}: ready {:.0} ms after spawn; resident memory after the load {:.1} MiB",
            peer.startup.as_secs_f64() * 1000.0,
            peer.rss_mib()
        ));
        peer.stop();
    }
    rows.sort_by_key(|r| r.connections);
    println!("{}", report::table(&rows, &["kserve", "hyper-baseline"]));
    for note in notes {
        println!("- {note}");
    }
    Ok(())
}
