//! `skiff load`: a load generator that knows about scale to zero. It plays a scenario (constant
//! concurrency, steps, a ramp, a burst at zero or an open-loop rate, in cycles with idle gaps)
//! against a URL or a model, samples the service's replicas from `skiff up` or the cluster while
//! it runs, and reports latency per phase (at zero, scaling, steady), cold starts, the time to the
//! needed replicas and errors by kind — as a table, `--json`, or a self-contained HTML report — and
//! exits 99 when a `--max-errors` or `--max-p99` threshold is crossed.

mod client;
mod coldstart;
pub(crate) mod flags;
mod openai;
mod phase;
mod progress;
mod record;
mod report;
mod runner;
mod sampler;
mod scenario;
mod service;
mod summary;
mod table;
mod threshold;
mod timeline;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use clap::ArgGroup;
use http::{HeaderMap, HeaderValue, Method};

use flags::{ErrorBudget, Idle, Stage, Stages};
use record::Recorder;
use runner::Plan;
use sampler::Choice;
use scenario::{Closed, Scenario, Shape};

/// `skiff load` flags (after `hey`, `vegeta` and `k6` where they fit).
#[derive(Debug, Clone, clap::Args)]
#[command(group(ArgGroup::new("scenario").args(["burst", "step", "ramp", "rate"])))]
pub struct LoadArgs {
    /// The URL to load; with --model, the address to send to (default http://127.0.0.1:8080).
    pub url: Option<String>,
    /// Load this model with an example input built from its V2 metadata (`GET /v2/models/NAME`);
    /// with --openai, the `model` the chat completions name (default: the InferenceService of the
    /// Host or path, else --service).
    #[arg(long)]
    pub model: Option<String>,
    /// Send streamed OpenAI chat completions and report time to first token, inter-token latency
    /// and tokens per second (also when the URL's path ends in /chat/completions).
    #[arg(long)]
    pub openai: bool,
    /// --openai: prompts, one per line or JSON lines (`{"prompt": …}`), sent in turn (default: a
    /// small built-in set).
    #[arg(long, conflicts_with_all = ["body", "body_file"])]
    pub prompts: Option<PathBuf>,
    /// --openai: `max_tokens` of each chat completion.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u32,
    /// Closed loop: concurrent workers, each sending when its last request answered.
    #[arg(short = 'c', long, default_value_t = 10)]
    pub concurrency: usize,
    /// How long each cycle loads (default 10s); for --burst, the longest wait for the replicas to settle (default 60s).
    #[arg(short = 'd', long, value_parser = flags::duration, conflicts_with_all = ["step", "ramp"])]
    pub duration: Option<Duration>,
    /// N requests at once (at zero, with --idle zero), then wait for their answers and for the replicas to settle.
    #[arg(long)]
    pub burst: Option<usize>,
    /// Concurrency steps, `C1:T1,C2:T2,…` (each held for its time).
    #[arg(long, value_parser = flags::stages)]
    pub step: Option<Stages>,
    /// A ramp, `C1:T1,C2:T2,…` (linear from the previous stage's concurrency, from 0 at first; k6's stages).
    #[arg(long, value_parser = flags::stages)]
    pub ramp: Option<Stages>,
    /// Open loop: requests per second, sent on schedule whatever the answers do; latency counts from when each was due.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Times to play the scenario.
    #[arg(long, default_value_t = 1)]
    pub cycles: u32,
    /// Gap between cycles: a duration, or `zero` to wait before every cycle until no replica is ready.
    #[arg(long, value_parser = flags::idle, default_value = "0s")]
    pub idle: Idle,
    /// Longest wait for zero replicas with --idle zero.
    #[arg(long, value_parser = flags::duration, default_value = "10m")]
    pub zero_timeout: Duration,
    /// After a burst, how long the ready replicas must equal those asked for before the cycle ends.
    #[arg(long, value_parser = flags::duration, default_value = "5s")]
    pub settle: Duration,
    /// A request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_parser = flags::header)]
    pub headers: Vec<(http::HeaderName, HeaderValue)>,
    /// The Host header (`iris.default.example.com` reaches a service through Skiff's router).
    #[arg(long)]
    pub host: Option<String>,
    /// Method (default POST with a body, GET without).
    #[arg(short = 'm', long)]
    pub method: Option<String>,
    /// Request body; `@FILE` reads a file.
    #[arg(short = 'b', long, conflicts_with_all = ["body_file", "model"])]
    pub body: Option<String>,
    /// Request body from a file.
    #[arg(short = 'D', long, conflicts_with = "model")]
    pub body_file: Option<PathBuf>,
    /// Content-Type of the body.
    #[arg(short = 'T', long, default_value = "application/json")]
    pub content_type: String,
    /// Longest a request may take, connecting included.
    #[arg(short = 't', long, value_parser = flags::duration, default_value = "30s")]
    pub timeout: Duration,
    /// Most requests in flight at once; open-loop requests due beyond it are not sent and count as errors.
    #[arg(long, default_value_t = 10_000)]
    pub max_inflight: usize,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write a self-contained HTML report with charts to this file.
    #[arg(short = 'o', long)]
    pub out: Option<PathBuf>,
    /// Exit 99 when errors exceed this count, or this share (`1%`).
    #[arg(long, value_parser = flags::error_budget)]
    pub max_errors: Option<ErrorBudget>,
    /// Exit 99 when the p99 latency exceeds this (`250ms`).
    #[arg(long, value_parser = flags::duration)]
    pub max_p99: Option<Duration>,
    /// Sample replicas from the `skiff up` whose admin endpoint is here, an address or a port on
    /// 127.0.0.1 (default: try 127.0.0.1:9091, then the cluster).
    #[arg(long, value_name = "ADDR", conflicts_with = "kube", value_parser = crate::standalone::admin::parse_addr,
          alias = "admin-port")]
    pub admin: Option<SocketAddr>,
    /// Sample replicas from the cluster (the revisions' Deployments; kubeconfig or in-cluster).
    #[arg(long)]
    pub kube: bool,
    /// Namespace of the InferenceService (default: from the Host, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The InferenceService to sample (default: from --model, the Host or the path).
    #[arg(long)]
    pub service: Option<String>,
    /// How often replicas are sampled.
    #[arg(long, value_parser = flags::duration, default_value = "250ms")]
    pub sample_every: Duration,
}

/// The scenario the flags ask for.
fn scenario(args: &LoadArgs) -> anyhow::Result<Scenario> {
    let duration = args.duration.unwrap_or(Duration::from_secs(10));
    Ok(match (&args.burst, &args.step, &args.ramp, args.rate) {
        (Some(n), ..) => {
            anyhow::ensure!(*n > 0, "--burst: at least 1 request");
            Scenario::Burst(*n)
        }
        (_, Some(Stages(stages)), ..) => Scenario::Closed(Closed { shape: Shape::Step, stages: stages.clone() }),
        (_, _, Some(Stages(stages)), _) => Scenario::Closed(Closed { shape: Shape::Ramp, stages: stages.clone() }),
        (.., Some(rate)) => {
            anyhow::ensure!(rate.is_finite() && rate > 0.0, "--rate: more than 0 requests per second");
            Scenario::Rate { rate, duration }
        }
        _ => {
            anyhow::ensure!(args.concurrency > 0, "--concurrency: at least 1");
            let stage = Stage { concurrency: args.concurrency, duration };
            Scenario::Closed(Closed { shape: Shape::Step, stages: vec![stage] })
        }
    })
}

/// The body: `--body`, `@FILE`, `--body-file`, or none.
fn body(args: &LoadArgs) -> anyhow::Result<Option<Bytes>> {
    let file = match (&args.body, &args.body_file) {
        (Some(text), _) => match text.strip_prefix('@') {
            Some(path) => PathBuf::from(path),
            None => return Ok(Some(Bytes::from(text.clone()))),
        },
        (None, Some(path)) => path.clone(),
        (None, None) => return Ok(None),
    };
    let bytes = std::fs::read(&file).with_context(|| format!("reading the body from {}", file.display()))?;
    Ok(Some(bytes.into()))
}

/// Headers from `-H`, `--host` and `-T`.
fn headers(args: &LoadArgs, with_body: bool) -> anyhow::Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    for (name, value) in &args.headers {
        headers.append(name.clone(), value.clone());
    }
    if let Some(host) = &args.host {
        headers.insert(http::header::HOST, host.parse().with_context(|| format!("--host {host:?}"))?);
    }
    if with_body && !headers.contains_key(http::header::CONTENT_TYPE) {
        let value = args.content_type.parse().with_context(|| format!("-T {:?}", args.content_type))?;
        headers.insert(http::header::CONTENT_TYPE, value);
    }
    Ok(headers)
}

/// The target and, with --model, the example body fetched from its metadata.
async fn target(args: &LoadArgs) -> anyhow::Result<client::Target> {
    let method = |default: Method| -> anyhow::Result<Method> {
        args.method.as_deref().map_or(Ok(default), |m| m.to_uppercase().parse().context("-m: not an HTTP method"))
    };
    if let Some(url) = args.url.as_deref().filter(|url| args.openai || openai::detect(false, url)) {
        return chat_target(args, url);
    }
    anyhow::ensure!(!args.openai, "--openai: give the URL of the chat completions");
    let Some(model_name) = &args.model else {
        let url = args.url.as_deref().context("give a URL to load, or --model NAME")?;
        let body = body(args)?;
        let method = method(if body.is_some() { Method::POST } else { Method::GET })?;
        let headers = headers(args, body.is_some())?;
        return client::Target::new(url, method, headers, body.unwrap_or_default(), args.timeout)
            .map_err(anyhow::Error::msg);
    };
    let base = args.url.as_deref().unwrap_or("http://127.0.0.1:8080").trim_end_matches('/');
    let metadata_url = format!("{base}/v2/models/{model_name}");
    let get = client::Target::new(&metadata_url, Method::GET, headers(args, false)?, Bytes::new(), args.timeout)
        .map_err(anyhow::Error::msg)?;
    let (status, answer) =
        client::fetch(&get).await.map_err(|e| anyhow::anyhow!("GET {metadata_url}: {}", e.kind()))?;
    anyhow::ensure!(status.is_success(), "GET {metadata_url}: {status}: {}", String::from_utf8_lossy(&answer));
    let metadata: serde_json::Value =
        serde_json::from_slice(&answer).with_context(|| format!("GET {metadata_url}: not JSON"))?;
    let example =
        skiff_api::example::example_request(&metadata).map_err(|e| anyhow::anyhow!("model {model_name}: {e}"))?;
    let url = format!("{base}/v2/models/{model_name}/infer");
    client::Target::new(&url, method(Method::POST)?, headers(args, true)?, example.to_string().into(), args.timeout)
        .map_err(anyhow::Error::msg)
}

/// The target of `--openai`: streamed chat completions of `--prompts` (or the built-in ones).
fn chat_target(args: &LoadArgs, url: &str) -> anyhow::Result<client::Target> {
    let prompts = match &args.prompts {
        Some(file) => {
            let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            openai::prompts(&text).map_err(|e| anyhow::anyhow!("--prompts {}: {e}", file.display()))?
        }
        None => openai::BUILT_IN.iter().map(|p| (*p).to_owned()).collect(),
    };
    anyhow::ensure!(args.max_tokens > 0, "--max-tokens: at least 1");
    let mut target = client::Target::new(url, Method::POST, headers(args, true)?, Bytes::new(), args.timeout)
        .map_err(anyhow::Error::msg)?;
    let host = target.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let model = match &args.model {
        Some(model) => model.clone(),
        None => service::resolve(args.service.as_deref(), None, host, &target.path, args.namespace.as_deref())
            .map(|s| s.name)
            .context("--openai: which model to name is not known from the URL or Host: give --model NAME")?,
    };
    target.chat = Some(Arc::new(openai::Chat::new(&model, &prompts, args.max_tokens)));
    Ok(target)
}

/// Runs `skiff load`; returns the exit code (0, or 99 when a threshold was crossed, 1 when
/// nothing could connect).
pub async fn run(args: LoadArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(args.cycles > 0, "--cycles: at least 1");
    anyhow::ensure!(args.max_inflight > 0, "--max-inflight: at least 1");
    anyhow::ensure!(!args.sample_every.is_zero(), "--sample-every: more than 0");
    let scenario = scenario(&args)?;
    let target = Arc::new(target(&args).await?);
    let host = target.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or_default();
    let service =
        service::resolve(args.service.as_deref(), args.model.as_deref(), host, &target.path, args.namespace.as_deref());
    let choice = match (args.admin, args.kube) {
        (Some(admin), _) => Choice::SkiffUp(admin),
        (None, true) => Choice::Cluster,
        (None, false) => Choice::Either,
    };
    let source = match &service {
        Some(service) => sampler::choose(choice, service).await?,
        None if choice == Choice::Either => {
            eprintln!(
                "skiff load: which InferenceService {} serves is not known (give --service NAME); the load runs without replica samples",
                target.url
            );
            None
        }
        None => anyhow::bail!("--admin and --kube need the InferenceService's name: give --service NAME"),
    };
    anyhow::ensure!(
        source.is_some() || args.idle != Idle::UntilZero,
        "--idle zero needs replica samples (from --admin or --kube)"
    );
    let about = summary::About {
        target: if host == target.authority { target.url.clone() } else { format!("{} (Host {host})", target.url) },
        scenario: scenario.describe(),
        cycles: args.cycles,
        rate: args.rate,
        replica_source: source.as_ref().map(|s| s.describe()),
    };
    let plan = Plan {
        scenario,
        cycles: args.cycles,
        idle: args.idle,
        zero_timeout: args.zero_timeout,
        settle: args.settle,
        settle_limit: args.duration.unwrap_or(Duration::from_secs(60)),
        max_inflight: args.max_inflight,
    };

    let recorder = Arc::new(Recorder::new());
    let (latest_tx, latest) = tokio::sync::watch::channel(None);
    let latest = source.is_some().then_some(latest);
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let sampler = tokio::spawn(runner::sample(source, args.sample_every, recorder.clone(), latest_tx, stopped));
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = tokio::spawn(progress::run(recorder.clone(), terminal));
    runner::play(&plan, target.clone(), recorder.clone(), latest).await;
    let _ = stop.send(());
    let _ = sampler.await;
    progress.abort();
    let _ = progress.await;
    if terminal {
        eprintln!();
    }

    let record = Arc::into_inner(recorder).context("a request outlived the run")?.into_record();
    let mut summary = summary::summarize(&record, &about);
    let limits = threshold::Limits { max_errors: args.max_errors, max_p99: args.max_p99 };
    summary.thresholds = threshold::check(&summary, limits);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", table::table(&summary));
    }
    std::io::Write::flush(&mut std::io::stdout())?;
    if let Some(out) = &args.out {
        std::fs::write(out, report::render(&summary)).with_context(|| format!("writing {}", out.display()))?;
        eprintln!("skiff load: report written to {}", out.display());
    }
    let unreachable =
        summary.ok == 0 && summary.errors > 0 && summary.errors_by_kind.keys().all(|kind| kind.starts_with("connect:"));
    if unreachable {
        eprintln!("skiff load: nothing could connect to {}", target.authority);
        return Ok(1);
    }
    Ok(threshold::exit_code(&summary.thresholds))
}
