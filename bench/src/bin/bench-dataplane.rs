//! `bench-dataplane`: the serverless data plane, measured. In one run, against one `skiff up`:
//! 1. the warm path — V2 infer through the Pingora router vs straight to the replica vs nginx as a
//!    reverse proxy to the same replica, and `pingora-minimal` (the bare Pingora proxy, the router's
//!    ceiling), at 1, 16 and 64 keep-alive connections, in `--rounds`
//!    rounds whose order of peers rotates (this VM's noise is ±25 %), reported as medians;
//! 2. cold starts from zero — spawn, model load, and activator overhead (first response − replica ready);
//! 3. a 0 → 200 concurrency step — time until the replicas the autoscaler asks for are ready, and failures.
//!
//! Run from the repository root after `scripts/setup.sh` (nginx from Debian for the proxy baseline):
//! `target/release/bench-dataplane`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Parser;
use skiff_bench::IRIS_V2_BODY;
use skiff_bench::load::{self, LoadSpec, Stats};
use skiff_bench::peer::{Peer, free_port};
use skiff_bench::report::{self, Row};
use skiff_bench::status;

#[derive(Parser)]
struct Args {
    /// Connection counts for the warm path.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    connections: Vec<usize>,
    /// Rounds of the warm path; each measures every peer at every connection count, the order of
    /// the peers rotating from round to round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Measured seconds per warm-path cell.
    #[arg(long, default_value_t = 5)]
    duration: u64,
    /// Cold starts to measure.
    #[arg(long, default_value_t = 3)]
    cold_starts: usize,
    /// Concurrency of the step (0: no step).
    #[arg(long, default_value_t = 200)]
    step: usize,
    /// Seconds the step load runs.
    #[arg(long, default_value_t = 20)]
    step_seconds: u64,
}

fn manifest(name: &str, predictor: &str, annotations: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\n  annotations:\n    serving.kserve.io/bench: \"true\"\n{annotations}spec:\n  predictor:\n{predictor}    model:\n      modelFormat: {{name: onnx}}\n      storageUri: file://{}\n",
        std::fs::canonicalize("examples/models/iris").expect("run from the repository root").display()
    )
}

fn write_folder(dir: &Path) -> anyhow::Result<()> {
    std::fs::write(dir.join("warm.yaml"), manifest("warm", "    minReplicas: 1\n    maxReplicas: 1\n", ""))?;
    std::fs::write(
        dir.join("cold.yaml"),
        manifest("cold", "    minReplicas: 0\n", "    autoscaling.knative.dev/initial-scale: \"0\"\n"),
    )?;
    std::fs::write(
        dir.join("step.yaml"),
        manifest(
            "step",
            "    minReplicas: 0\n    containerConcurrency: 25\n",
            "    autoscaling.knative.dev/initial-scale: \"0\"\n",
        ),
    )?;
    std::fs::write(
        dir.join("config.txt"),
        "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n  allow-zero-initial-scale: \"true\"\nactivator:\n  maxPending: 1000\n",
    )?;
    Ok(())
}

fn nginx_command(dir: &Path, port: u16, upstream: &str) -> anyhow::Result<Command> {
    let conf = format!(
        "worker_processes 2;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log;\nevents {{ worker_connections 4096; }}\nhttp {{\n  access_log off;\n  upstream replica {{ server {upstream}; keepalive 128; }}\n  server {{\n    listen 127.0.0.1:{port};\n    location / {{ proxy_pass http://replica; proxy_http_version 1.1; proxy_set_header Connection \"\"; }}\n  }}\n}}\n",
        d = dir.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, conf)?;
    let mut command = Command::new("nginx");
    command.arg("-p").arg(dir).arg("-c").arg(&path);
    Ok(command)
}

async fn measure(address: &str, path: &str, connections: usize, seconds: u64) -> anyhow::Result<Stats> {
    load::run(&LoadSpec {
        address: address.to_owned(),
        path: path.to_owned(),
        body: IRIS_V2_BODY.into(),
        connections,
        warmup: Duration::from_secs(1),
        duration: Duration::from_secs(seconds),
    })
    .await
}

async fn wait_status(
    admin: std::net::SocketAddr,
    what: &str,
    check: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok(s) = status::fetch(admin).await
            && check(&s)
        {
            return Ok(s);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("timed out waiting for {what}")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let work = tempfile_dir()?;
    write_folder(&work)?;
    let bin_dir = std::env::current_exe()?.parent().unwrap().to_path_buf();
    let (port, admin_port) = (free_port()?, free_port()?);
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], admin_port));
    let mut up = Command::new(bin_dir.join("skiff"));
    up.arg("up").arg(&work).args([
        "--http-port",
        &port.to_string(),
        "--admin-port",
        &admin_port.to_string(),
        "--config",
    ]);
    up.arg(work.join("config.txt"));
    let skiff =
        Peer::start("skiff up", up, port, "/healthz", &work.join("skiff-up.log"), Duration::from_secs(60)).await?;
    let warm = wait_status(admin, "warm ready", |s| status::replicas(s, "warm").1 == 1).await?;
    let replica = status::revision(&warm, "warm").unwrap()["replicas"][0].as_str().unwrap().to_owned();
    let path = "/v2/models/warm/infer";

    // 1. Warm path.
    let nginx_port = free_port()?;
    let nginx = match nginx_command(&work, nginx_port, &replica) {
        Ok(cmd) => {
            Peer::start("nginx", cmd, nginx_port, "/v2/health/ready", &work.join("nginx.log"), Duration::from_secs(10))
                .await
                .ok()
        }
        Err(_) => None,
    };
    let minimal_port = free_port()?;
    let mut minimal = Command::new(bin_dir.join("pingora-minimal"));
    minimal.args(["--port", &minimal_port.to_string(), "--upstream", &replica]);
    let minimal = Peer::start(
        "pingora-minimal",
        minimal,
        minimal_port,
        "/v2/health/ready",
        &work.join("pingora-minimal.log"),
        Duration::from_secs(10),
    )
    .await?;
    let mut targets = vec![
        ("direct", replica.clone()),
        ("skiff-router", skiff.address.clone()),
        ("pingora-minimal", minimal.address.clone()),
    ];
    if let Some(n) = &nginx {
        targets.push(("nginx", n.address.clone()));
    }
    let mut rows = Vec::new();
    for round in 0..args.rounds {
        for &connections in &args.connections {
            for i in 0..targets.len() {
                let (name, address) = &targets[(i + round) % targets.len()];
                let stats = measure(address, path, connections, args.duration).await?;
                eprintln!(
                    "round {} {name} @ {connections}: {:.0} req/s p50 {:.3} ms",
                    round + 1,
                    stats.rps(),
                    stats.quantile_ms(0.5)
                );
                rows.push(Row { peer: (*name).to_owned(), connections, stats });
            }
        }
    }
    let medians = report::medians(&rows);
    println!(
        "## Warm path (V2 infer, iris, one replica; medians of {} rounds)\n\n{}",
        args.rounds,
        report::median_table(&medians, &["direct", "pingora-minimal", "nginx"])
    );
    for &connections in &args.connections {
        let p50 =
            |peer: &str| medians.iter().find(|m| m.peer == peer && m.connections == connections).map(|m| m.p50_ms);
        let added = |peer: &str| Some((p50(peer)? - p50("direct")?) * 1000.0);
        if let (Some(router), Some(minimal)) = (added("skiff-router"), added("pingora-minimal")) {
            let nginx = added("nginx").map_or_else(|| "no nginx".to_owned(), |n| format!("nginx {n:.0} µs"));
            println!(
                "- median p50 added at {connections} connections: router {router:.0} µs, pingora-minimal {minimal:.0} µs, {nginx}"
            );
        }
    }
    minimal.stop();
    if let Some(n) = nginx {
        n.stop();
    }

    // 2. Cold starts.
    println!(
        "\n## Cold start from zero (iris)\n\n| trial | first response ms | spawn ms | model load + ready ms | activator overhead ms |\n|---:|---:|---:|---:|---:|"
    );
    for trial in 1..=args.cold_starts {
        // A new replica is one more spawn: `lastStartMs` is a duration, which two trials may share.
        let spawns =
            |s: &serde_json::Value| status::revision(s, "cold").and_then(|r| r["spawns"].as_u64()).unwrap_or(0);
        let before = wait_status(admin, "cold at zero", |s| status::replicas(s, "cold") == (0, 0)).await?;
        let previous = spawns(&before);
        let (code, elapsed) = load::once(&skiff.address, "/v2/models/cold/infer", IRIS_V2_BODY.into()).await?;
        anyhow::ensure!(code.is_success(), "the cold request failed with {code}");
        let first = elapsed.as_secs_f64() * 1000.0;
        let s = wait_status(admin, "the new replica in the status", |s| {
            spawns(s) > previous && status::revision(s, "cold").is_some_and(|r| r["ready"] == 1)
        })
        .await?;
        let rev = status::revision(&s, "cold").unwrap();
        let (start, spawn) =
            (rev["lastStartMs"].as_f64().unwrap_or(f64::NAN), rev["lastSpawnMs"].as_f64().unwrap_or(f64::NAN));
        println!("| {trial} | {first:.0} | {spawn:.0} | {:.0} | {:.0} |", start - spawn, first - start);
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    // 3. A 0 -> N concurrency step.
    if args.step == 0 {
        skiff.stop();
        return Ok(());
    }
    wait_status(admin, "step at zero", |s| status::replicas(s, "step") == (0, 0)).await?;
    let started = Instant::now();
    let spec = LoadSpec {
        address: skiff.address.clone(),
        path: "/v2/models/step/infer".into(),
        body: IRIS_V2_BODY.into(),
        connections: args.step,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(args.step_seconds),
    };
    let load = tokio::spawn(async move { load::run(&spec).await });
    let mut peak_desired = 0;
    let mut converged: Option<f64> = None;
    while !load.is_finished() {
        if let Ok(s) = status::fetch(admin).await {
            let (desired, ready) = status::replicas(&s, "step");
            if desired > peak_desired {
                peak_desired = desired;
                converged = None;
            }
            if converged.is_none() && desired > 0 && ready >= peak_desired {
                converged = Some(started.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stats = load.await??;
    println!(
        "\n## 0 → {} concurrency step (containerConcurrency 25, target 17.5 per replica)\n\n- replicas asked for at the peak: {peak_desired}; all ready {} s after the step\n- requests: {} ok, {} failed {:?}; p50 {:.1} ms, p99 {:.1} ms over the {} s",
        args.step,
        converged.map_or("—".to_owned(), |t| format!("{t:.1}")),
        stats.ok,
        stats.errors,
        stats.failures,
        stats.quantile_ms(0.5),
        stats.quantile_ms(0.99),
        args.step_seconds
    );
    skiff.stop();
    Ok(())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("skiff-bench-dataplane-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
