//! `bench-storage`: cold start against model size (issue 22), in one run against one MinIO and
//! one `skiff up`, for `gen_models.py`'s ONNX models (`--sizes`, default 1M,100M,1G):
//!
//! 1. **Download throughput** of the same objects from the same MinIO: `skiff-fetch` (Skiff's
//!    fetcher) against `kserve-storage` (KServe's storage initializer, `kserve_storage_fetch.py`),
//!    read against one curl stream of the object (the store's single-stream rate) and a TCP copy
//!    over 127.0.0.1 of the model's size, at least 256 MiB (the loopback limit). Each tool's own seconds (listing included, interpreter
//!    start not).
//! 2. **Cold starts in `skiff up`**, four paths, each broken down from the status into fetch
//!    (`fetched.millis`), spawn (`lastSpawnMs`), load (`lastStartMs − lastSpawnMs`) and the
//!    client's first response: (a) `store`: `s3://` with the cache emptied (`skiff cache prune`);
//!    (b) `cache`: a second service of the same URI right after, so the cache holds it; (c) `disk`:
//!    `file://`; (d) `kserve-storage`: its initializer downloads the objects (the process's wall
//!    time, interpreter start included, as an init container's) and the model is renamed into a
//!    `file://` service's folder, then its cold start; its first response is the download plus
//!    that cold start.
//! 3. **A burst at zero**: `--burst` concurrent requests to two services of one uncached URI; the
//!    model must be downloaded once over both.
//!
//! Every service waits at zero before its request, and nothing else runs meanwhile. The paths
//! alternate over `--rounds`; the figures are min, median and max. No figure is asserted.
//!
//! Run from the repository root after `PEERS=kserve-storage bench/peers/setup.sh` and a release
//! build of `skiff`, `skiff-server`, `skiff-fetch` and this:
//! `target/release/bench-storage --sizes 1M,100M --rounds 3`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use serde_json::Value;
use skiff_bench::minio::Minio;
use skiff_bench::peer::{Peer, free_port};
use skiff_bench::storage::{self, Cold, ColdCell, Throughput};
use skiff_bench::{load, status};

#[derive(Parser)]
#[command(about = "Cold start against model size: from a store, the cache, local disk and KServe's initializer")]
struct Args {
    /// Model sizes (gen_models.py's: 1M, 100M, 1G).
    #[arg(long, value_delimiter = ',', default_value = "1M,100M,1G")]
    sizes: Vec<String>,
    /// Rounds; the order of the peers and paths rotates from round to round.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Concurrent requests of the burst at zero (0: no burst).
    #[arg(long, default_value_t = 8)]
    burst: usize,
    /// Where the models are (generated there by gen_models.py when missing).
    #[arg(long, default_value = "/tmp/skiff-bench-models")]
    models: PathBuf,
    /// The Python with kserve-storage, onnx and numpy (bench/peers/setup.sh's venv).
    #[arg(long, default_value = ".bench/kserve-storage-venv/bin/python")]
    python: PathBuf,
    /// The cold-start paths: `store` (and `cache` right after it), `disk`, `kserve-storage`.
    #[arg(long, value_delimiter = ',', default_value = "store,disk,kserve-storage")]
    paths: Vec<String>,
    /// Leave out the download throughput (part 1).
    #[arg(long)]
    no_throughput: bool,
    /// The models' cached forms (issue 37) in `skiff up`: `on` (its default: `<model cache>/ort`),
    /// `off` (`SKIFF_ORT_CACHE_DIR=off`: every start loads the ONNX file), or `both`: two `skiff
    /// up` side by side, each path's cold start taken on one then the other, alternating.
    #[arg(long, default_value = "on")]
    ort_cache: String,
}

const BUCKET: &str = "models";
const MODEL: &str = "model.onnx";
/// The least a loopback copy sends, so that a small model's row still shows the interface's limit
/// rather than a connection's setup.
const LOOPBACK_MIN: u64 = 256 << 20;
const KSERVE_FETCH: &str = "bench/peers/kserve_storage_fetch.py";

/// A service's name for a path and size: `store-100m`.
fn service(path: &str, size: &str) -> String {
    format!("{path}-{}", size.to_lowercase())
}

fn manifest(name: &str, uri: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\n  annotations:\n    \
         autoscaling.knative.dev/initial-scale: \"0\"\nspec:\n  predictor:\n    minReplicas: 0\n    model:\n      \
         modelFormat: {{name: onnx}}\n      storageUri: {uri}\n"
    )
}

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n  \
                      allow-zero-initial-scale: \"true\"\nactivator:\n  maxPending: 1000\n";

fn uri(size: &str) -> String {
    format!("s3://{BUCKET}/{size}")
}

/// Runs `command` (the store's environment set), expecting one JSON line on stdout.
fn json_line(command: &mut Command, minio: &Minio) -> anyhow::Result<Value> {
    command.envs(minio.env());
    let out = command.output().with_context(|| format!("running {command:?}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{command:?} failed with {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or_default()
    );
    let text = String::from_utf8(out.stdout)?;
    let line = text.lines().rev().find(|l| l.starts_with('{')).context("no JSON line")?;
    Ok(serde_json::from_str(line)?)
}

fn kserve_fetch(args: &Args, minio: &Minio, size: &str, dir: &Path) -> anyhow::Result<Value> {
    let _ = std::fs::remove_dir_all(dir);
    json_line(Command::new(&args.python).arg(KSERVE_FETCH).arg(uri(size)).arg(dir), minio)
}

/// MB/s over the loopback interface: `bytes` written through one TCP connection on 127.0.0.1
/// and read into memory.
async fn tcp_loopback(bytes: u64) -> anyhow::Result<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let reader = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await?;
        let mut buffer = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buffer).await? {
                0 => return anyhow::Ok(total),
                n => total += n as u64,
            }
        }
    });
    let started = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let chunk = vec![7u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        stream.write_all(&chunk[..n]).await?;
        left -= n as u64;
    }
    stream.shutdown().await?;
    let read = reader.await??;
    anyhow::ensure!(read == bytes, "the loopback copy read {read} of {bytes} bytes");
    Ok(bytes as f64 / 1e6 / started.elapsed().as_secs_f64())
}

/// Download throughput: every peer on every size, the peers' order rotating over the rounds.
async fn throughput(args: &Args, minio: &Minio, bin: &Path, work: &Path) -> anyhow::Result<Vec<Throughput>> {
    let peers = ["skiff-fetch", "kserve-storage", "curl (1 stream)", "TCP loopback"];
    let mut cells: Vec<Throughput> = Vec::new();
    for round in 0..args.rounds {
        for size in &args.sizes {
            for i in 0..peers.len() {
                let peer = peers[(i + round) % peers.len()];
                let dir = work.join("download");
                let _ = std::fs::remove_dir_all(&dir);
                let mb_per_s = match peer {
                    "skiff-fetch" => {
                        let report = json_line(Command::new(bin.join("skiff-fetch")).arg(uri(size)).arg(&dir), minio)?;
                        let bytes = report["downloaded"].as_f64().context("no downloaded")?;
                        bytes / 1e6 / report["seconds"].as_f64().context("no seconds")?
                    }
                    "kserve-storage" => {
                        kserve_fetch(args, minio, size, &dir)?["mb_per_s"].as_f64().context("no MB/s")?
                    }
                    "curl (1 stream)" => {
                        let (bytes, seconds) = minio.read_once(BUCKET, &format!("{size}/model.onnx"))?;
                        bytes as f64 / 1e6 / seconds
                    }
                    _ => tcp_loopback(storage::parse_size(size).unwrap_or(0).max(LOOPBACK_MIN)).await?,
                };
                let _ = std::fs::remove_dir_all(&dir);
                eprintln!("round {} {size} {peer}: {mb_per_s:.0} MB/s", round + 1);
                match cells.iter_mut().find(|c| c.size == *size && c.peer == peer) {
                    Some(cell) => cell.mb_per_s.push(mb_per_s),
                    None => cells.push(Throughput { size: size.clone(), peer: peer.into(), mb_per_s: vec![mb_per_s] }),
                }
            }
        }
    }
    cells.sort_by_key(|c| (args.sizes.iter().position(|s| *s == c.size), peers.iter().position(|p| *p == c.peer)));
    Ok(cells)
}

/// `skiff up` and what the cold starts need of it.
struct Up {
    /// `""` for a lone `skiff up`, else which one: ` · ONNX` or ` · ORT form`.
    label: &'static str,
    skiff: Peer,
    admin: SocketAddr,
    bin: PathBuf,
    cache: PathBuf,
    services: Vec<String>,
}

impl Up {
    async fn wait(&self, what: &str, check: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            if let Ok(s) = status::fetch(self.admin).await
                && check(&s)
            {
                return Ok(s);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        anyhow::bail!("timed out waiting for {what}")
    }

    /// Waits until every service is at zero replicas, so that nothing else loads meanwhile.
    async fn all_at_zero(&self) -> anyhow::Result<()> {
        self.wait("every service at zero", |s| self.services.iter().all(|name| status::replicas(s, name) == (0, 0)))
            .await
            .map(|_| ())
    }

    /// With cached forms on: waits until the form of the model of `bytes` is written (the
    /// replica writes it once it is ready), so that the next start finds it and nothing is
    /// written meanwhile.
    async fn cached_form_written(&self, bytes: u64, under: &Path) -> anyhow::Result<()> {
        if self.label != ORT_FORM {
            return Ok(());
        }
        let dir = self.cache.join("ort");
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            let written = std::fs::read_dir(&dir).into_iter().flatten().filter_map(|e| e.ok()).any(|e| {
                let meta = std::fs::read(e.path()).ok().and_then(|t| serde_json::from_slice::<Value>(&t).ok());
                meta.is_some_and(|m| {
                    use std::os::unix::fs::MetadataExt;
                    let source = &m["source"];
                    let path = Path::new(source["path"].as_str().unwrap_or_default());
                    path.starts_with(under)
                        && std::fs::metadata(path).is_ok_and(|f| {
                            f.len() == bytes
                                && source["len"].as_u64() == Some(bytes)
                                && source["ino"].as_u64() == Some(f.ino())
                                && source["mtime_ns"].as_i64() == Some(f.mtime() * 1_000_000_000 + f.mtime_nsec())
                        })
                })
            });
            if written {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("timed out waiting for the cached form of {bytes} bytes in {}", dir.display())
    }

    /// Evicts every model no replica holds (all of them, at zero).
    fn empty_cache(&self) -> anyhow::Result<()> {
        let out = Command::new(self.bin.join("skiff"))
            .args(["cache", "prune", "--to", "0", "--dir"])
            .arg(&self.cache)
            .output()?;
        anyhow::ensure!(out.status.success(), "skiff cache prune: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }

    /// One request to `name` at zero, and its cold start as the status tells it.
    async fn cold(&self, name: &str, body: &str) -> anyhow::Result<Cold> {
        let spawns = |s: &Value| status::revision(s, name).and_then(|r| r["spawns"].as_u64()).unwrap_or(0);
        let before = spawns(&status::fetch(self.admin).await?);
        let path = format!("/v2/models/{name}/infer");
        let (code, elapsed) = load::once(&self.skiff.address, &path, body.to_owned().into()).await?;
        anyhow::ensure!(code.is_success(), "the cold request to {name} failed with {code}");
        let s = self
            .wait("the new replica in the status", |s| {
                spawns(s) > before && status::revision(s, name).is_some_and(|r| r["ready"].as_u64() >= Some(1))
            })
            .await?;
        let r = status::revision(&s, name).context("no revision")?;
        let number = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
        let (start, spawn) = (number(&r["lastStartMs"]), number(&r["lastSpawnMs"]));
        Ok(Cold {
            fetch_ms: number(&r["fetched"]["millis"]),
            spawn_ms: spawn,
            load_ms: start - spawn,
            first_ms: elapsed.as_secs_f64() * 1e3,
            downloaded: r["fetched"]["downloaded"].as_u64().unwrap_or(0),
        })
    }

    /// `n` requests at once, split over two services of one URI at zero with the cache emptied;
    /// returns (requests answered, each service's `fetched.downloaded`).
    async fn burst(&self, twins: [&str; 2], body: &str, n: usize) -> anyhow::Result<(usize, Vec<u64>)> {
        self.all_at_zero().await?;
        self.empty_cache()?;
        let mut requests = tokio::task::JoinSet::new();
        for i in 0..n {
            let (address, path, body) =
                (self.skiff.address.clone(), format!("/v2/models/{}/infer", twins[i % 2]), body.to_owned());
            requests.spawn(async move { load::once(&address, &path, body.into()).await });
        }
        let mut ok = 0;
        while let Some(done) = requests.join_next().await {
            ok += usize::from(done?.is_ok_and(|(code, _)| code.is_success()));
        }
        let s = self.wait("both services ready", |s| twins.iter().all(|t| status::replicas(s, t).1 >= 1)).await?;
        let downloaded = twins
            .iter()
            .map(|t| status::revision(&s, t).and_then(|r| r["fetched"]["downloaded"].as_u64()).unwrap_or(0))
            .collect();
        Ok((ok, downloaded))
    }
}

fn push(cells: &mut Vec<ColdCell>, size: &str, path: &str, cold: Cold) {
    eprintln!(
        "{size} {path}: fetch {:.0} ms, spawn {:.0} ms, load {:.0} ms, first response {:.0} ms",
        cold.fetch_ms, cold.spawn_ms, cold.load_ms, cold.first_ms
    );
    match cells.iter_mut().find(|c| c.size == size && c.path == path) {
        Some(cell) => cell.rounds.push(cold),
        None => cells.push(ColdCell { size: size.into(), path: path.into(), rounds: vec![cold] }),
    }
}

/// The label of the `skiff up` that loads every model from its ONNX file.
const ONNX: &str = " · ONNX";
/// The label of the `skiff up` that loads models from their cached forms.
const ORT_FORM: &str = " · ORT form";

/// Starts one `skiff up` over `folder` (in `work`, its own model cache), with cached forms off
/// when `label` is [`ONNX`].
async fn start_up(
    label: &'static str,
    folder: &Path,
    work: &Path,
    minio: &Minio,
    bin: &Path,
    services: &[String],
) -> anyhow::Result<Up> {
    let cache = work.join("cache");
    let (port, admin_port) = (free_port()?, free_port()?);
    let mut command = Command::new(bin.join("skiff"));
    command
        .arg("up")
        .arg(folder)
        .args(["--http-port", &port.to_string(), "--admin-port", &admin_port.to_string(), "--config"])
        .arg(work.join("config.txt"))
        .arg("--model-cache")
        .arg(&cache)
        .envs(minio.env());
    if label == ONNX {
        command.env("SKIFF_ORT_CACHE_DIR", "off");
    } else {
        command.env_remove("SKIFF_ORT_CACHE_DIR");
    }
    let skiff =
        Peer::start("skiff up", command, port, "/healthz", &work.join("skiff-up.log"), Duration::from_secs(60)).await?;
    let up = Up {
        label,
        skiff,
        admin: SocketAddr::from(([127, 0, 0, 1], admin_port)),
        bin: bin.to_owned(),
        cache,
        services: services.to_vec(),
    };
    up.wait("every service listed", |s| up.services.iter().all(|name| status::revision(s, name).is_some())).await?;
    Ok(up)
}

/// The paths over the rounds (in each `skiff up` of `--ort-cache`, alternating), then the burst;
/// prints the cold-start table.
async fn cold_starts(args: &Args, minio: &Minio, bin: &Path, work: &Path) -> anyhow::Result<Vec<ColdCell>> {
    let folder = work.join("up");
    std::fs::create_dir_all(&folder)?;
    let kserve = args.paths.iter().any(|p| p == "kserve-storage");
    let mut services = Vec::new();
    for size in &args.sizes {
        let local = std::fs::canonicalize(args.models.join(size))?;
        let kserve_dir = work.join("kserve").join(size);
        let mut manifests = vec![
            ("store", uri(size)),
            ("cache", uri(size)),
            ("disk", format!("file://{}", local.display())),
            ("twin-a", uri(size)),
            ("twin-b", uri(size)),
        ];
        if kserve {
            // Its folder must hold the model when skiff up reads the manifest.
            kserve_fetch(args, minio, size, &kserve_dir)?;
            manifests.push(("kserve", format!("file://{}", kserve_dir.display())));
        }
        for (path, storage_uri) in manifests {
            let name = service(path, size);
            std::fs::write(folder.join(format!("{name}.yaml")), manifest(&name, &storage_uri))?;
            services.push(name);
        }
    }
    std::fs::write(work.join("config.txt"), CONFIG)?;
    let labels: Vec<&'static str> = match args.ort_cache.as_str() {
        "both" => vec![ONNX, ORT_FORM],
        "off" => vec![ONNX],
        _ => vec![""],
    };
    let mut ups = Vec::new();
    for label in labels {
        let dir = work.join(format!("up{}", ups.len()));
        std::fs::create_dir_all(&dir)?;
        std::fs::copy(work.join("config.txt"), dir.join("config.txt"))?;
        let up =
            start_up(if label.is_empty() { ORT_FORM } else { label }, &folder, &dir, minio, bin, &services).await?;
        ups.push((label, up));
    }

    let mut cells = Vec::new();
    let groups: Vec<&str> =
        ["store", "disk", "kserve-storage"].into_iter().filter(|g| args.paths.iter().any(|p| p == g)).collect();
    for round in 0..args.rounds {
        for size in &args.sizes {
            let bytes = std::fs::metadata(args.models.join(size).join(MODEL))?.len();
            let body = storage::infer_body(storage::input_width(storage::parse_size(size).context("a size")?));
            for i in 0..groups.len() {
                for j in 0..ups.len() {
                    let (label, up) = &ups[(j + round) % ups.len()];
                    let path = |name: &str| format!("{name}{label}");
                    for (_, other) in &ups {
                        other.all_at_zero().await?;
                    }
                    match groups[(i + round) % groups.len()] {
                        "store" => {
                            up.empty_cache()?;
                            push(&mut cells, size, &path("store"), up.cold(&service("store", size), &body).await?);
                            up.all_at_zero().await?;
                            // Its first load wrote the cached form of the entry just fetched.
                            up.cached_form_written(bytes, &up.cache.join("models")).await?;
                            push(&mut cells, size, &path("cache"), up.cold(&service("cache", size), &body).await?);
                        }
                        "disk" => {
                            if round == 0 && up.label == ORT_FORM {
                                // The first start from disk writes its cached form: a warm-up.
                                up.cold(&service("disk", size), &body).await?;
                                up.cached_form_written(bytes, &std::fs::canonicalize(args.models.join(size))?).await?;
                                up.all_at_zero().await?;
                            }
                            push(&mut cells, size, &path("disk"), up.cold(&service("disk", size), &body).await?)
                        }
                        _ => {
                            // Downloaded beside the served folder, then renamed over its model:
                            // `skiff up` checks the folder holds one whenever it reads the manifests.
                            let staging = work.join("kserve-download").join(size);
                            let started = Instant::now();
                            let report = kserve_fetch(args, minio, size, &staging)?;
                            let download_ms = started.elapsed().as_secs_f64() * 1e3;
                            std::fs::rename(staging.join(MODEL), work.join("kserve").join(size).join(MODEL))?;
                            let mut cold = up.cold(&service("kserve", size), &body).await?;
                            cold.fetch_ms = download_ms;
                            cold.first_ms += download_ms;
                            cold.downloaded = report["bytes"].as_u64().unwrap_or(0);
                            push(&mut cells, size, &path("kserve-storage"), cold);
                            // A new file each time: its cached form is written after each start.
                            up.all_at_zero().await?;
                            up.cached_form_written(bytes, &work.join("kserve")).await?;
                        }
                    }
                }
            }
        }
    }
    cells.sort_by_key(|c| {
        let order = ["store", "cache", "disk", "kserve-storage"];
        let base = c.path.split(" · ").next().unwrap_or_default().to_owned();
        (args.sizes.iter().position(|s| *s == c.size), order.iter().position(|p| *p == base), c.path.clone())
    });
    println!(
        "\n## Cold starts in skiff up (medians of {} rounds; fetch = fetched.millis, or kserve-storage's run; \
         load = lastStartMs − lastSpawnMs)\n\n{}",
        args.rounds,
        storage::cold_table(&cells)
    );

    let (_, up) = ups.last().context("no skiff up")?;
    if args.burst > 0 {
        for (_, other) in &ups {
            other.all_at_zero().await?;
        }
        println!(
            "## A burst at zero: {} requests at once over two services of one uncached URI\n\n\
             | size | answered | downloaded per service MB | downloads of the model |\n|---|---:|---|---:|",
            args.burst
        );
        for size in &args.sizes {
            let body = storage::infer_body(storage::input_width(storage::parse_size(size).context("a size")?));
            let twins = [service("twin-a", size), service("twin-b", size)];
            let (ok, downloaded) = up.burst([&twins[0], &twins[1]], &body, args.burst).await?;
            let bytes = std::fs::metadata(args.models.join(size).join(MODEL))?.len();
            let per: Vec<String> = downloaded.iter().map(|d| format!("{:.1}", *d as f64 / 1e6)).collect();
            println!(
                "| {size} | {ok}/{} | {} | {:.2} |",
                args.burst,
                per.join(" + "),
                downloaded.iter().sum::<u64>() as f64 / bytes as f64
            );
        }
    }
    for (_, up) in ups {
        up.skiff.stop();
    }
    Ok(cells)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(Path::new(KSERVE_FETCH).is_file(), "run from the repository root");
    anyhow::ensure!(
        ["on", "off", "both"].contains(&args.ort_cache.as_str()),
        "--ort-cache is on, off or both, not {}",
        args.ort_cache
    );
    anyhow::ensure!(
        args.python.is_file(),
        "no {}: run PEERS=kserve-storage bench/peers/setup.sh",
        args.python.display()
    );
    for size in &args.sizes {
        anyhow::ensure!(storage::parse_size(size).is_some(), "--sizes: {size} is not a size");
    }
    let missing: Vec<&str> =
        args.sizes.iter().filter(|s| !args.models.join(s).join(MODEL).is_file()).map(String::as_str).collect();
    if !missing.is_empty() {
        let status = Command::new(&args.python)
            .args(["bench/models/gen_models.py", "--sizes", &missing.join(","), "--out"])
            .arg(&args.models)
            .status()?;
        anyhow::ensure!(status.success(), "gen_models.py failed");
    }
    let bin = std::env::current_exe()?.parent().context("no folder")?.to_path_buf();
    let work = std::env::temp_dir().join(format!("skiff-bench-storage-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let minio = Minio::start(&std::env::current_dir()?, &work.join("minio"), &[BUCKET])?;
    for size in &args.sizes {
        minio.put(BUCKET, &format!("{size}/{MODEL}"), &args.models.join(size).join(MODEL))?;
    }

    if !args.no_throughput {
        let speeds = throughput(&args, &minio, &bin, &work).await?;
        println!(
            "## Download throughput from MinIO on 127.0.0.1 (medians of {} rounds; MB = 10^6 bytes)\n\n{}",
            args.rounds,
            storage::throughput_table(&speeds, "TCP loopback")
        );
        let cold = cold_starts(&args, &minio, &bin, &work).await?;
        let targets: Vec<_> = args.sizes.iter().flat_map(|size| storage::targets(size, &speeds, &cold)).collect();
        println!("\n## Targets (issue 22)\n\n{}", storage::target_table(&targets));
    } else {
        let cold = cold_starts(&args, &minio, &bin, &work).await?;
        println!("\n## Cached forms (issue 37)\n\n{}", storage::ort_form_table(&cold));
    }
    drop(minio);
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
