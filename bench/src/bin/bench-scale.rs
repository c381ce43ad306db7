//! `bench-scale`: Skiff's cluster data plane at a scale this machine cannot run pods for, measured
//! with synthetic objects and no pods:
//!
//! - the router: building its routes from N InferenceServices (their status' traffic) and
//!   publishing the route table, the time a change of one InferenceService costs (the whole table
//!   is rebuilt), and the memory of the routes plus the endpoints of 2N revisions;
//! - the autoscaler: the CPU time of one tick (a sample of every revision, then a decision for
//!   each) with N revisions, on one thread with tokio's clock paused, so only compute counts.
//!
//! `target/release/bench-scale [--services 2000] [--rounds 20]`

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;
use skiff_api::InferenceServiceResource;
use skiff_autoscaler::{AutoscalerConfig, Metric, PredictorScaling, ScalingSpec};
use skiff_dataplane::endpoints::Endpoints;
use skiff_dataplane::{MetricSource, ReplicaBackend, RevisionKey, Runner};
use skiff_router::cluster::route_of;
use skiff_router::{Router, RouterConfig};

#[derive(Parser)]
#[command(about = "Route updates, memory and autoscaler CPU with thousands of synthetic revisions")]
struct Args {
    /// InferenceServices (each with two revisions in a canary split).
    #[arg(long, default_value_t = 2000)]
    services: usize,
    /// Repetitions of each timing (the median is printed).
    #[arg(long, default_value_t = 20)]
    rounds: usize,
}

fn isvc(i: usize) -> InferenceServiceResource {
    let name = format!("model-{i}");
    serde_json::from_value(json!({
        "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": name, "namespace": format!("team-{}", i % 50)},
        "spec": {"predictor": {"minReplicas": 0, "containerConcurrency": 4,
            "model": {"modelFormat": {"name": "onnx"}, "storageUri": "file:///models/iris"}}},
        "status": {"url": format!("http://{name}.team-{}.example.com", i % 50), "components": {"predictor": {"traffic": [
            {"revisionName": format!("{name}-predictor-00002"), "percent": 25, "tag": "latest", "latestRevision": true},
            {"revisionName": format!("{name}-predictor-00001"), "percent": 75, "tag": "prev"},
        ]}}},
    }))
    .expect("a valid InferenceService")
}

/// Resident memory of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix(" kB")?.trim().parse().ok()).unwrap_or(0)
}

/// CPU time (user + system) of this process so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

/// Every revision is at one ready replica; scaling is counted, not done.
#[derive(Default)]
struct Synthetic {
    scaled: AtomicU32,
}

impl ReplicaBackend for Synthetic {
    fn scale(&self, _: &RevisionKey, _: u32) {
        self.scaled.fetch_add(1, Ordering::Relaxed);
    }
    fn ready_replicas(&self, _: &RevisionKey) -> u32 {
        1
    }
}

impl MetricSource for Synthetic {
    fn observe(&self, revision: &RevisionKey, _: Metric) -> impl Future<Output = Option<f64>> + Send {
        let value = (revision.name.len() % 7) as f64;
        async move { Some(value) }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let n = args.services;
    let isvcs: Vec<InferenceServiceResource> = (0..n).map(isvc).collect();

    // Router: routes from InferenceServices, and the table swap, timed.
    let before = rss_kib();
    let endpoints = Arc::new(Endpoints::default());
    let config = RouterConfig { listen: "127.0.0.1:0".parse()?, activator: None, ..RouterConfig::default() };
    let router = Router::new(config, endpoints.clone())?;
    let mut build = Vec::new();
    let mut publish = Vec::new();
    for _ in 0..args.rounds {
        let started = Instant::now();
        let routes: Vec<_> = isvcs.iter().filter_map(route_of).collect();
        build.push(started.elapsed());
        let started = Instant::now();
        router.publish(routes);
        publish.push(started.elapsed());
    }
    for (i, route) in isvcs.iter().filter_map(route_of).enumerate() {
        for target in &route.targets {
            let key = RevisionKey::new(route.namespace.as_str(), target.revision_name.as_str());
            let addrs = (0..2).map(|r| SocketAddr::from(([10, 244, (i / 250) as u8, (i % 250) as u8], 8080 + r)));
            endpoints.get_or_insert(&key, 4).set_addresses(addrs);
        }
    }
    let memory = rss_kib().saturating_sub(before);
    println!("router, {n} InferenceServices ({} revisions with 2 endpoints each):", 2 * n);
    println!("  routes from InferenceServices   median {:>8.2} ms", median(build).as_secs_f64() * 1e3);
    println!("  route table publish (swap)      median {:>8.2} ms", median(publish).as_secs_f64() * 1e3);
    println!("  memory of routes + endpoints    {:>8.1} MiB", memory as f64 / 1024.0);

    // Autoscaler: CPU per tick with 2n revisions, clock paused.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    let revisions = 2 * n;
    let (ticks, cpu) = runtime.block_on(async {
        let synthetic = Arc::new(Synthetic::default());
        let tick = Duration::from_secs(2);
        let runner = Runner::new(synthetic.clone(), synthetic.clone(), tick);
        let config = AutoscalerConfig::default();
        let fields = PredictorScaling { min_replicas: Some(0), container_concurrency: Some(4), ..Default::default() };
        let spec = ScalingSpec::resolve(&fields, &Default::default(), &config).expect("a valid spec");
        for i in 0..revisions {
            runner.resume(
                &RevisionKey::new(format!("team-{}", i % 50), format!("model-{i}-predictor-00001")),
                spec.clone(),
            );
        }
        let started = cpu_time();
        let task = tokio::spawn(runner.clone().run());
        let simulated = Duration::from_secs(120);
        tokio::time::sleep(simulated).await;
        task.abort();
        ((simulated.as_secs() / tick.as_secs()) as u32, cpu_time() - started)
    });
    println!("autoscaler, {revisions} revisions (a sample per second, a decision per 2 s tick):");
    println!("  CPU per tick (2 samples + 1 decision each)  {:>8.2} ms", cpu.as_secs_f64() * 1e3 / f64::from(ticks));
    println!(
        "  CPU share of one core                       {:>8.2} %",
        cpu.as_secs_f64() * 100.0 / (f64::from(ticks) * 2.0)
    );
    Ok(())
}
