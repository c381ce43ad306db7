//! `bench-grpc`: KServe's V2 protocol over REST and over gRPC, side by side in one run, ghz-style
//! (closed loop, each connection its own TCP connection with one call in flight, fixed warm-up and
//! duration, HDR latency percentiles).
//!
//! 1. One iris row at 1, 16 and 64 connections against `skiff-server` — REST V2 JSON, gRPC
//!    `ModelInfer` with typed contents, gRPC with raw contents — and KServe's own Python model
//!    server (`bench/peers/kserve_onnx.py`) over its gRPC port and its REST port: req/s, p50, p99
//!    and ratios to KServe.
//! 2. A 1 MiB tensor (FP32 `[1, 262144]` into `bench/models/identity`, whose answer is the same
//!    tensor) sent to `skiff-server` as REST JSON, REST with the binary tensor extension, gRPC
//!    typed and gRPC raw: req/s, p50 and p99 at 1 connection, and the bytes each call moves.
//!
//! Each part's cells are measured in `--rounds` rounds whose order rotates from round to round
//! (this VM's noise is ±25 %), and the tables give each cell's medians. gRPC is framed by hand over
//! hyper's HTTP/2 client ([`skiff_bench::wire`]), the same hyper stack the REST calls use.
//!
//! Run from the repository root after `scripts/setup.sh` and `bench/peers/setup.sh`:
//! `target/release/bench-grpc --rounds 3` (see `--help`). Peers whose set-up is missing are skipped
//! with a note.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use skiff_bench::IRIS_V2_BODY;
use skiff_bench::peer::{Peer, cpu_seconds, free_port, self_cpu_seconds};
use skiff_bench::report::{self, Median, Row};
use skiff_bench::wire::proto::model_infer_request::InferInputTensor;
use skiff_bench::wire::proto::{
    InferTensorContents, ModelInferRequest, ModelInferResponse, ServerReadyRequest, ServerReadyResponse,
};
use skiff_bench::wire::{self, Connection, MODEL_INFER, Probe, SERVER_READY, Target, grpc_unframe};

const IRIS_ROW: [f32; 4] = [6.8, 2.8, 4.8, 1.4];

#[derive(Parser)]
struct Args {
    /// Connection counts for the iris part.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    connections: Vec<usize>,
    /// Measured seconds per cell.
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Warm-up seconds per cell.
    #[arg(long, default_value_t = 1)]
    warmup: u64,
    /// Rounds; each measures every cell once, in an order that rotates from round to round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Iris-part targets, of: skiff-rest, skiff-grpc, skiff-grpc-raw, kserve-rest, kserve-grpc,
    /// kserve-grpc-raw (empty: skip the part).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "skiff-rest,skiff-grpc,skiff-grpc-raw,kserve-rest,kserve-grpc,kserve-grpc-raw"
    )]
    peers: Vec<String>,
    /// Large-tensor targets on skiff-server, of: rest-json, rest-binary, grpc, grpc-raw (empty: skip
    /// the part).
    #[arg(long, value_delimiter = ',', default_value = "rest-json,rest-binary,grpc,grpc-raw")]
    large: Vec<String>,
    /// FP32 elements in the large tensor (262144 = 1 MiB).
    #[arg(long, default_value_t = 262_144)]
    large_elements: usize,
    /// Connections for the large-tensor part.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    large_connections: Vec<usize>,
    /// The classifier's folder.
    #[arg(long, default_value = "examples/models/iris")]
    model_dir: PathBuf,
    /// The FP32 identity model's folder.
    #[arg(long, default_value = "bench/models/identity")]
    large_model_dir: PathBuf,
    /// Where peer logs go.
    #[arg(long, default_value = "target/bench-logs")]
    logs: PathBuf,
}

fn le_bytes(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 4);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// A V2 gRPC infer request of one FP32 `[1, n]` input, typed or raw.
fn grpc_request(model: &str, input: &str, values: &[f32], raw: bool) -> ModelInferRequest {
    let tensor = InferInputTensor {
        name: input.to_owned(),
        datatype: "FP32".to_owned(),
        shape: vec![1, values.len() as i64],
        contents: (!raw).then(|| InferTensorContents { fp32_contents: values.to_vec(), ..Default::default() }),
        ..Default::default()
    };
    ModelInferRequest {
        model_name: model.to_owned(),
        inputs: vec![tensor],
        raw_input_contents: if raw { vec![le_bytes(values)] } else { Vec::new() },
        ..Default::default()
    }
}

/// A V2 REST JSON infer body of one FP32 `[1, n]` input; the numbers are written as f32s
/// (shortest round-trip form), as a client holding f32s writes them.
fn rest_json(input: &str, values: &[f32]) -> Bytes {
    let data = serde_json::to_string(values).expect("JSON");
    let name = serde_json::to_string(input).expect("JSON");
    format!(r#"{{"inputs":[{{"name":{name},"shape":[1,{}],"datatype":"FP32","data":{data}}}]}}"#, values.len()).into()
}

/// A V2 REST body with the binary tensor extension: the JSON header (which asks for binary
/// outputs), then the tensor's little-endian bytes; returns the body and the header's length.
fn rest_binary(input: &str, values: &[f32]) -> (Bytes, usize) {
    let header = serde_json::json!({
        "inputs": [{
            "name": input, "shape": [1, values.len()], "datatype": "FP32",
            "parameters": { "binary_data_size": values.len() * 4 }
        }],
        "parameters": { "binary_data_output": true }
    });
    let header = serde_json::to_vec(&header).expect("JSON");
    let mut body = BytesMut::with_capacity(header.len() + values.len() * 4);
    body.put_slice(&header);
    body.put_slice(&le_bytes(values));
    (body.freeze(), header.len())
}

/// Deterministic values in [0, 1) with full f32 precision (like normalised pixels), so the JSON
/// text is what a real client sends (about 10 characters a number).
fn tensor_values(n: usize) -> Vec<f32> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// The iris-part target `name` at the given skiff and KServe addresses.
fn small_target(name: &str, skiff: &str, kserve_rest: &str, kserve_grpc: &str) -> Option<Target> {
    let path = "/v2/models/iris/infer";
    let json = "application/json";
    Some(match name {
        "skiff-rest" => Target::rest(name, skiff, path, json, IRIS_V2_BODY.into()),
        "skiff-grpc" => Target::grpc(name, skiff, MODEL_INFER, &grpc_request("iris", "input", &IRIS_ROW, false)),
        "skiff-grpc-raw" => Target::grpc(name, skiff, MODEL_INFER, &grpc_request("iris", "input", &IRIS_ROW, true)),
        "kserve-rest" => Target::rest(name, kserve_rest, path, json, IRIS_V2_BODY.into()),
        "kserve-grpc" => Target::grpc(name, kserve_grpc, MODEL_INFER, &grpc_request("iris", "input", &IRIS_ROW, false)),
        "kserve-grpc-raw" => {
            Target::grpc(name, kserve_grpc, MODEL_INFER, &grpc_request("iris", "input", &IRIS_ROW, true))
        }
        _ => return None,
    })
}

/// The large-tensor target `variant` at `address`.
fn large_target(variant: &str, address: &str, values: &[f32]) -> Option<Target> {
    let path = "/v2/models/identity/infer";
    Some(match variant {
        "rest-json" => Target::rest(variant, address, path, "application/json", rest_json("x", values)),
        "rest-binary" => {
            let (body, header_len) = rest_binary("x", values);
            let mut target = Target::rest(variant, address, path, "application/octet-stream", body);
            target.headers.push((
                http::HeaderName::from_static("inference-header-content-length"),
                http::HeaderValue::from(header_len),
            ));
            target
        }
        "grpc" => Target::grpc(variant, address, MODEL_INFER, &grpc_request("identity", "x", values, false)),
        "grpc-raw" => Target::grpc(variant, address, MODEL_INFER, &grpc_request("identity", "x", values, true)),
        _ => return None,
    })
}

/// Checks that an answer carries `elements` output values in the form its target asked for.
fn check_answer(target: &Target, probe: &Probe, elements: usize) -> Result<(), String> {
    let answer = &probe.answer;
    match target.protocol {
        wire::Protocol::Grpc => {
            let response: ModelInferResponse = grpc_unframe(answer)?;
            let raw = target.name.ends_with("-raw");
            let output = response.outputs.first().ok_or("no outputs")?;
            let count = if raw {
                response.raw_output_contents.first().map_or(0, |b| b.len() / 4)
            } else {
                let contents = output.contents.as_ref().ok_or("no typed contents")?;
                contents.fp32_contents.len() + contents.int64_contents.len() + contents.int_contents.len()
            };
            if elements > 0 && count != elements {
                return Err(format!("{count} output values, expected {elements}"));
            }
            if elements == 0 && count == 0 {
                return Err(format!("empty output: {response:?}"));
            }
        }
        wire::Protocol::Rest if target.content_type == "application/octet-stream" => {
            if answer.len() < elements * 4 {
                return Err(format!("{} answer bytes for {elements} binary values", answer.len()));
            }
        }
        wire::Protocol::Rest => {
            let json: serde_json::Value = serde_json::from_slice(answer).map_err(|e| e.to_string())?;
            let count = json["outputs"][0]["data"].as_array().map_or(0, Vec::len);
            if count == 0 || (elements > 0 && count != elements) {
                return Err(format!("{count} output values, expected {elements}"));
            }
        }
    }
    Ok(())
}

/// Polls a gRPC `ServerReady` until it answers true.
async fn grpc_ready(address: &str, timeout: Duration) -> anyhow::Result<Duration> {
    let target = Target::grpc("ready", address, SERVER_READY, &ServerReadyRequest {});
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < timeout {
        match Connection::open(&target).await {
            Ok(mut connection) => match connection.call(&target).await {
                Ok(body) => match grpc_unframe::<ServerReadyResponse>(&body) {
                    Ok(r) if r.ready => return Ok(started.elapsed()),
                    Ok(_) => last = "not ready".into(),
                    Err(e) => last = e,
                },
                Err(e) => last = e,
            },
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("gRPC at {address} not ready within {timeout:?}: {last}")
}

async fn start_skiff(name: &str, model_dir: &std::path::Path, logs: &std::path::Path) -> anyhow::Result<Peer> {
    let bin_dir = std::env::current_exe()?.parent().expect("a folder").to_path_buf();
    let port = free_port()?;
    let mut command = Command::new(bin_dir.join("skiff-server"));
    command.args(["--model-dir", &model_dir.display().to_string(), "--bind", "127.0.0.1"]);
    command.args(["--http-port", &port.to_string()]);
    Peer::start(name, command, port, "/v2/health/ready", &logs.join(format!("{name}.log")), Duration::from_secs(60))
        .await
}

/// KServe's server with gRPC on, both on loopback; returns it and its gRPC address.
async fn start_kserve(args: &Args) -> anyhow::Result<(Peer, String)> {
    let python = PathBuf::from(".bench/kserve-venv/bin/python");
    anyhow::ensure!(python.exists(), "{} is missing: run bench/peers/setup.sh", python.display());
    let (port, grpc_port) = (free_port()?, free_port()?);
    let mut command = Command::new("bash");
    command.args(["bench/peers/run_kserve.sh", &port.to_string(), &args.model_dir.display().to_string()]);
    command.env("KSERVE_GRPC_PORT", grpc_port.to_string());
    let log = args.logs.join("kserve-grpc.log");
    let peer = Peer::start("kserve", command, port, "/v2/health/ready", &log, Duration::from_secs(120)).await?;
    let grpc = format!("127.0.0.1:{grpc_port}");
    if let Err(e) = grpc_ready(&grpc, Duration::from_secs(60)).await {
        peer.stop();
        return Err(e);
    }
    Ok((peer, grpc))
}

/// CPU time per call of one measured cell.
struct CpuRow {
    target: String,
    connections: usize,
    server_us: f64,
    client_us: f64,
}

/// Measures `targets` at each connection count, in an order rotated by `round`, with the CPU time
/// the target's server (`pids`) and this program spend over each measured period.
async fn measure(
    targets: &[Target],
    pids: &HashMap<String, u32>,
    connections: &[usize],
    args: &Args,
    round: usize,
    rows: &mut Vec<Row>,
    cpu: &mut Vec<CpuRow>,
) {
    let (warmup, duration) = (Duration::from_secs(args.warmup), Duration::from_secs(args.duration));
    for &c in connections {
        for i in 0..targets.len() {
            let target = &targets[(i + round) % targets.len()];
            let server = pids.get(&target.name).copied().unwrap_or(0);
            let sampler = tokio::spawn(async move {
                tokio::time::sleep(warmup).await;
                let before = (cpu_seconds(server), self_cpu_seconds());
                tokio::time::sleep(duration).await;
                (cpu_seconds(server) - before.0, self_cpu_seconds() - before.1)
            });
            let result = wire::run(target, c, warmup, duration).await;
            let (server_s, client_s) = sampler.await.unwrap_or_default();
            match result {
                Ok(stats) => {
                    eprintln!(
                        "round {} {} @ {c}: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms, {} errors {:?}",
                        round + 1,
                        target.name,
                        stats.rps(),
                        stats.quantile_ms(0.5),
                        stats.quantile_ms(0.99),
                        stats.errors,
                        stats.failures
                    );
                    let calls = stats.ok.max(1) as f64;
                    cpu.push(CpuRow {
                        target: target.name.clone(),
                        connections: c,
                        server_us: server_s * 1e6 / calls,
                        client_us: client_s * 1e6 / calls,
                    });
                    rows.push(Row { peer: target.name.clone(), connections: c, stats });
                }
                Err(e) => eprintln!("round {} {} @ {c}: failed: {e}", round + 1, target.name),
            }
        }
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The median CPU µs per call of each cell, as a Markdown table.
fn cpu_table(cpu: &[CpuRow]) -> String {
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for row in cpu {
        if !keys.contains(&(row.target.as_str(), row.connections)) {
            keys.push((row.target.as_str(), row.connections));
        }
    }
    keys.sort_by_key(|k| k.1);
    let mut out = String::from(
        "| target | conns | server CPU µs per call | bench-grpc CPU µs per call |\n|---|---:|---:|---:|\n",
    );
    for (target, c) in keys {
        let cell: Vec<&CpuRow> = cpu.iter().filter(|r| r.target == target && r.connections == c).collect();
        out.push_str(&format!(
            "| {target} | {c} | {:.1} | {:.1} |\n",
            median(cell.iter().map(|r| r.server_us).collect()),
            median(cell.iter().map(|r| r.client_us).collect())
        ));
    }
    out
}

/// Probes each target (checking its answer) and keeps those that answer well.
async fn probe_all(targets: Vec<Target>, elements: usize, notes: &mut Vec<String>) -> Vec<(Target, Probe)> {
    let mut kept = Vec::new();
    for target in targets {
        match wire::probe(&target, 20).await {
            Ok(probe) => match check_answer(&target, &probe, elements) {
                Ok(()) => kept.push((target, probe)),
                Err(e) => notes.push(format!("{}: skipped, wrong answer ({e})", target.name)),
            },
            Err(e) => notes.push(format!("{}: skipped ({e})", target.name)),
        }
    }
    kept
}

/// Bytes with thin groups of three digits: `1 048 629`.
fn grouped(bytes: f64) -> String {
    let digits = format!("{:.0}", bytes.round());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn bytes_table(probes: &[(Target, Probe)]) -> String {
    let mut out = String::from(
        "| target | request body | answer body | TCP bytes sent per call | TCP bytes received per call |\n\
         |---|---:|---:|---:|---:|\n",
    );
    for (target, probe) in probes {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            target.name,
            grouped(probe.request_body as f64),
            grouped(probe.response_body as f64),
            grouped(probe.sent_per_call),
            grouped(probe.received_per_call)
        ));
    }
    out
}

fn ratio_lines(medians: &[Median], pairs: &[(&str, &str)], connections: &[usize]) -> Vec<String> {
    let rps = |peer: &str, c: usize| medians.iter().find(|m| m.peer == peer && m.connections == c).map(|m| m.rps);
    pairs
        .iter()
        .filter_map(|(a, b)| {
            let cells: Vec<String> = connections
                .iter()
                .map(|&c| match (rps(a, c), rps(b, c)) {
                    (Some(x), Some(y)) if y > 0.0 => format!("{:.2}×", x / y),
                    _ => "–".to_owned(),
                })
                .collect();
            cells
                .iter()
                .any(|c| c != "–")
                .then(|| format!("- {a} ÷ {b} req/s at {connections:?} connections: {}", cells.join(" / ")))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    std::fs::create_dir_all(&args.logs)?;
    let small: Vec<String> = args.peers.iter().filter(|p| !p.is_empty()).cloned().collect();
    let large: Vec<String> = args.large.iter().filter(|p| !p.is_empty()).cloned().collect();
    let mut notes = Vec::new();
    let mut peers = Vec::new();

    let mut pids: HashMap<String, u32> = HashMap::new();
    let mut skiff_address = String::new();
    if small.iter().any(|p| p.starts_with("skiff-")) {
        match start_skiff("skiff-server", &args.model_dir, &args.logs).await {
            Ok(peer) => {
                skiff_address = peer.address.clone();
                peers.push(peer);
            }
            Err(e) => notes.push(format!("skiff-server: skipped ({e})")),
        }
    }
    let (mut kserve_rest, mut kserve_grpc) = (String::new(), String::new());
    if small.iter().any(|p| p.starts_with("kserve-")) {
        match start_kserve(&args).await {
            Ok((peer, grpc)) => {
                kserve_rest = peer.address.clone();
                kserve_grpc = grpc;
                peers.push(peer);
            }
            Err(e) => notes.push(format!("kserve: skipped ({e})")),
        }
    }
    let mut large_address = String::new();
    if !large.is_empty() {
        match start_skiff("skiff-server-identity", &args.large_model_dir, &args.logs).await {
            Ok(peer) => {
                large_address = peer.address.clone();
                peers.push(peer);
            }
            Err(e) => notes.push(format!("skiff-server-identity: skipped ({e})")),
        }
    }
    for peer in &peers {
        eprintln!("{}: ready in {:.0} ms", peer.name, peer.startup.as_secs_f64() * 1000.0);
    }

    let mut small_targets = Vec::new();
    for name in &small {
        let up = if name.starts_with("skiff-") { !skiff_address.is_empty() } else { !kserve_rest.is_empty() };
        match small_target(name, &skiff_address, &kserve_rest, &kserve_grpc) {
            Some(target) if up => small_targets.push(target),
            Some(_) => {}
            None => notes.push(format!("{name}: unknown target")),
        }
    }
    let values = tensor_values(args.large_elements);
    let mut large_targets = Vec::new();
    if !large_address.is_empty() {
        for variant in &large {
            match large_target(variant, &large_address, &values) {
                Some(target) => large_targets.push(target),
                None => notes.push(format!("{variant}: unknown large-tensor target")),
            }
        }
    }
    let small_probes = probe_all(small_targets, 0, &mut notes).await;
    let large_probes = probe_all(large_targets, args.large_elements, &mut notes).await;
    let small_targets: Vec<Target> = small_probes.iter().map(|(t, _)| t.clone()).collect();
    let large_targets: Vec<Target> = large_probes.iter().map(|(t, _)| t.clone()).collect();
    let pid_of = |address: &str| peers.iter().find(|p| p.address == address).map(Peer::pid);
    for target in small_targets.iter().chain(&large_targets) {
        let address = if target.address == kserve_grpc { &kserve_rest } else { &target.address };
        if let Some(pid) = pid_of(address) {
            pids.insert(target.name.clone(), pid);
        }
    }

    let (mut small_rows, mut large_rows, mut small_cpu, mut large_cpu) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        measure(&small_targets, &pids, &args.connections, &args, round, &mut small_rows, &mut small_cpu).await;
        let c = &args.large_connections;
        measure(&large_targets, &pids, c, &args, round, &mut large_rows, &mut large_cpu).await;
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

    if !small_probes.is_empty() {
        println!("## One iris row (V2 infer), {} rounds\n", args.rounds);
        let medians = report::medians(&small_rows);
        println!("{}", report::median_table(&medians, &["kserve-rest", "kserve-grpc"]));
        let pairs = [
            ("skiff-rest", "kserve-rest"),
            ("skiff-grpc", "kserve-grpc"),
            ("skiff-grpc-raw", "kserve-grpc-raw"),
            ("skiff-grpc", "skiff-rest"),
            ("skiff-grpc-raw", "skiff-rest"),
            ("kserve-grpc", "kserve-rest"),
        ];
        for line in ratio_lines(&medians, &pairs, &args.connections) {
            println!("{line}");
        }
        println!("\nCPU per call (medians; the server's process and this load generator's):\n");
        println!("{}", cpu_table(&small_cpu));
        println!("Bytes per call (one connection, after its first call):\n");
        println!("{}", bytes_table(&small_probes));
    }
    if !large_probes.is_empty() {
        println!(
            "## FP32 [1, {}] ({} bytes) through the identity model on skiff-server, {} rounds\n",
            args.large_elements,
            args.large_elements * 4,
            args.rounds
        );
        let medians = report::medians(&large_rows);
        println!("{}", report::median_table(&medians, &["rest-json"]));
        println!("CPU per call (medians):\n");
        println!("{}", cpu_table(&large_cpu));
        println!("Bytes per call (the answer carries the same tensor back):\n");
        println!("{}", bytes_table(&large_probes));
    }
    for note in notes {
        println!("- {note}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_carry_the_tensor() {
        let values = tensor_values(1000);
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let (binary, header_len) = rest_binary("x", &values);
        assert_eq!(binary.len(), header_len + 4000);
        let header: serde_json::Value = serde_json::from_slice(&binary[..header_len]).unwrap();
        assert_eq!(header["inputs"][0]["parameters"]["binary_data_size"], 4000);
        let json: serde_json::Value = serde_json::from_slice(&rest_json("x", &values)).unwrap();
        assert_eq!(json["inputs"][0]["data"].as_array().unwrap().len(), 1000);
        let raw = grpc_request("identity", "x", &values, true);
        assert_eq!((raw.raw_input_contents[0].len(), raw.inputs[0].contents.is_none()), (4000, true));
        let typed = grpc_request("identity", "x", &values, false);
        assert_eq!(typed.inputs[0].contents.as_ref().unwrap().fp32_contents.len(), 1000);
        for variant in ["rest-json", "rest-binary", "grpc", "grpc-raw"] {
            assert!(large_target(variant, "127.0.0.1:1", &values).is_some(), "{variant}");
        }
        assert!(small_target("skiff-grpc-raw", "a:1", "b:2", "c:3").is_some());
        assert_eq!(
            (grouped(1_048_629.0), grouped(86.0), grouped(123_456.4)),
            ("1 048 629".into(), "86".into(), "123 456".into())
        );
    }
}
