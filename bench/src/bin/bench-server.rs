//! `bench-server`: V2 infer on the iris classifier at 1, 16 and 64 keep-alive connections against,
//! in the same run, `skiff-server`, KServe's Python model server, MLServer and a bare hyper server;
//! prints req/s, p50, p99, memory and ratios as a Markdown table. Every peer runs from the start;
//! `--rounds` rounds measure them in an order that rotates from round to round (this VM's noise is
//! ±25 %), and the table gives each cell's medians.
//!
//! Each cell is measured a second time by NVIDIA's `perf_analyzer` (Triton's own load generator,
//! which published Triton figures come from; `scripts/perf-analyzer.sh` installs it): the same
//! model at the same concurrency, over HTTP and gRPC (`--perf-analyzer`), with `--pa-batch` rows a
//! request; a second table puts its medians beside the Skiff load generator's. perf_analyzer needs
//! Triton's model configuration endpoint, so peers without one (KServe's and MLServer's servers)
//! get a note, not figures.
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
use skiff_bench::perf_analyzer;
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
    /// Rounds; each measures every peer at every connection count.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Peers to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "skiff-server,kserve,mlserver,hyper-baseline")]
    peers: Vec<String>,
    /// The classifier's folder.
    #[arg(long, default_value = "examples/models/iris")]
    model_dir: PathBuf,
    /// Where peer logs go.
    #[arg(long, default_value = "target/bench-logs")]
    logs: PathBuf,
    /// Protocols perf_analyzer measures each cell over as well (`http`, `grpc`); empty: none.
    #[arg(long, value_delimiter = ',', default_value = "http,grpc")]
    perf_analyzer: Vec<String>,
    /// Rows per perf_analyzer request (`-b`; the Skiff load generator sends one).
    #[arg(long, default_value_t = 1)]
    pa_batch: usize,
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
    let mut peers = Vec::new();
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
        match Peer::start(name, command, port, ready_path, &log, Duration::from_secs(120)).await {
            Ok(peer) => {
                eprintln!("{name}: ready in {:.0} ms", peer.startup.as_secs_f64() * 1000.0);
                peers.push(peer);
            }
            Err(e) => notes.push(format!("{name}: skipped ({e})")),
        }
    }
    let protocols: Vec<String> = args.perf_analyzer.iter().filter(|p| !p.is_empty()).cloned().collect();
    let pa_command = if protocols.is_empty() {
        None
    } else {
        perf_analyzer::command().inspect_err(|e| notes.push(format!("perf_analyzer: skipped ({e:#})"))).ok()
    };
    // Peer and protocol pairs perf_analyzer failed on: not tried again.
    let mut pa_failed: Vec<(String, String)> = Vec::new();
    let mut pa_rows = Vec::new();
    let mut rows = Vec::new();
    for round in 0..args.rounds {
        for &connections in &args.connections {
            for i in 0..peers.len() {
                let peer = &peers[(i + round) % peers.len()];
                let spec = LoadSpec {
                    address: peer.address.clone(),
                    path: PATH.to_owned(),
                    body: IRIS_V2_BODY.into(),
                    connections,
                    warmup: Duration::from_secs(args.warmup),
                    duration: Duration::from_secs(args.duration),
                };
                let stats = load::run(&spec).await?;
                eprintln!(
                    "round {} {} @ {connections}: {:.0} req/s, p50 {:.3} ms",
                    round + 1,
                    peer.name,
                    stats.rps(),
                    stats.quantile_ms(0.5)
                );
                rows.push(Row { peer: peer.name.clone(), connections, stats });
                for protocol in pa_command.as_ref().map_or(&[][..], |_| protocols.as_slice()) {
                    if pa_failed.contains(&(peer.name.clone(), protocol.clone())) {
                        continue;
                    }
                    let spec = perf_analyzer::Spec {
                        address: peer.address.clone(),
                        model: "iris".to_owned(),
                        protocol: protocol.clone(),
                        concurrency: connections,
                        batch: args.pa_batch,
                        duration: Duration::from_secs(args.duration),
                    };
                    let csv = args.logs.join(format!("perf_analyzer-{}-{protocol}.csv", peer.name));
                    let command = pa_command.as_deref().unwrap_or_default();
                    match perf_analyzer::run(command, &spec, &csv).await {
                        Ok(figures) => {
                            eprintln!(
                                "round {} {} @ {connections} by perf_analyzer over {protocol}: {:.0} infer/s, p50 {:.3} ms",
                                round + 1,
                                peer.name,
                                figures.infer_per_sec,
                                figures.p50_ms
                            );
                            pa_rows.push(perf_analyzer::Row {
                                peer: peer.name.clone(),
                                protocol: protocol.clone(),
                                figures,
                            });
                        }
                        Err(e) => {
                            notes.push(format!("perf_analyzer over {protocol} could not measure {}: {e:#}", peer.name));
                            pa_failed.push((peer.name.clone(), protocol.clone()));
                        }
                    }
                }
            }
        }
    }
    for peer in peers {
        notes.push(format!(
            "{}: ready {:.0} ms after spawn; resident memory after the load {:.1} MiB",
            peer.name,
            peer.startup.as_secs_f64() * 1000.0,
            peer.rss_mib()
        ));
        peer.stop();
    }
    let medians = report::medians(&rows);
    println!("{}", report::median_table(&medians, &["kserve", "hyper-baseline"]));
    if !pa_rows.is_empty() {
        println!("{}", perf_analyzer::table(&perf_analyzer::medians(&pa_rows), &medians, args.pa_batch));
    }
    for &connections in &args.connections {
        let p50 =
            |peer: &str| medians.iter().find(|m| m.peer == peer && m.connections == connections).map(|m| m.p50_ms);
        if let (Some(skiff), Some(hyper)) = (p50("skiff-server"), p50("hyper-baseline")) {
            println!(
                "- median p50 of skiff-server − hyper-baseline at {connections} connections: {:.0} µs",
                (skiff - hyper) * 1000.0
            );
        }
    }
    for note in notes {
        println!("- {note}");
    }
    Ok(())
}
