//! `bench-web`: the models web app's index of 200 InferenceServices over real HTTP on loopback:
//! server time to render it (median, p99 of many loads) and what a first page load transfers,
//! gzip-compressed as the app sends it (HTML + script + stylesheet). The services are synthetic
//! and in memory (two revisions each, a canary, conditions), so the figure is the app's own time;
//! on a cluster the API server's LIST adds to it. Prints the figures; asserts nothing.
//!
//! Run from the repository root: `cargo run --release -p skiff-bench --bin bench-web`.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use skiff_api::status::Condition;
use skiff_web::backend::{Backend, EventView, LogStream, PodView, RevisionView, ServiceView};
use skiff_web::config::Settings;
use skiff_web::error::{Error, Result};
use skiff_web::metrics::sampler::Sampler;
use skiff_web::{App, Mode};

#[derive(Parser)]
struct Args {
    /// InferenceServices on the index.
    #[arg(long, default_value_t = 200)]
    services: usize,
    /// Index loads timed.
    #[arg(long, default_value_t = 200)]
    loads: usize,
}

/// Synthetic services held in memory.
struct Synthetic(Vec<ServiceView>);

fn service(i: usize) -> ServiceView {
    let name = format!("model-{i:03}");
    let revision = |n: u32, percent, tag: &str| RevisionView {
        name: format!("{name}-predictor-{n:05}"),
        percent,
        tag: Some(tag.into()),
        desired: Some(2),
        ready: Some(2),
    };
    let condition = |type_: &str| Condition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some("2026-11-22T20:00:00Z".into()),
        reason: None,
        message: None,
    };
    ServiceView {
        url: Some(format!("http://{name}.default.example.com")),
        namespace: "default".into(),
        ready: "True".into(),
        conditions: vec![condition("Ready"), condition("PredictorReady"), condition("IngressReady")],
        revisions: vec![revision(2, 10, "latest"), revision(1, 90, "prev")],
        canary_percent: Some(10),
        model_format: Some("onnx".into()),
        protocol: "v2".into(),
        rollback: Default::default(),
        created: Some(SystemTime::now() - Duration::from_secs(3600 + i as u64)),
        name,
    }
}

#[async_trait]
impl Backend for Synthetic {
    async fn namespaces(&self) -> Result<Vec<String>> {
        Ok(vec!["default".into(), "team-a".into()])
    }
    async fn list(&self, _: &str) -> Result<Vec<ServiceView>> {
        Ok(self.0.clone())
    }
    async fn get(&self, _: &str, name: &str) -> Result<ServiceView> {
        self.0.iter().find(|s| s.name == name).cloned().ok_or_else(|| Error::NotFound(name.into()))
    }
    async fn manifest(&self, _: &str, _: &str) -> Result<String> {
        Ok(String::new())
    }
    async fn create(&self, _: &str, _: Value) -> Result<ServiceView> {
        Err(Error::BadRequest("read-only".into()))
    }
    async fn patch(&self, _: &str, _: &str, _: Value) -> Result<()> {
        Err(Error::BadRequest("read-only".into()))
    }
    async fn rollback(&self, _: &str, _: &str) -> Result<()> {
        Err(Error::BadRequest("read-only".into()))
    }
    async fn delete(&self, _: &str, _: &str) -> Result<()> {
        Err(Error::BadRequest("read-only".into()))
    }
    async fn events(&self, _: &str, _: &str) -> Result<Vec<EventView>> {
        Ok(Vec::new())
    }
    async fn pods(&self, _: &str, _: &str) -> Result<Vec<PodView>> {
        Ok(Vec::new())
    }
    async fn logs(&self, _: &str, _: &str, _: &str, _: u32) -> Result<LogStream> {
        Err(Error::NotFound("logs".into()))
    }
}

/// GETs `url` accepting gzip; returns the time to the last byte and the bytes transferred.
async fn load(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    url: &str,
) -> (Duration, usize, String) {
    let request = http::Request::get(url).header("accept-encoding", "gzip").body(Empty::new()).unwrap();
    let started = Instant::now();
    let response = client.request(request).await.expect("the app answers");
    let encoding = response.headers().get("content-encoding").map(|v| v.to_str().unwrap_or("").to_owned());
    assert!(response.status().is_success(), "{url}: {}", response.status());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (started.elapsed(), body.len(), encoding.unwrap_or_else(|| "identity".into()))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let backend = Arc::new(Synthetic((0..args.services).map(service).collect()));
    let settings = Settings::standalone();
    let sampler = Sampler::new(backend.clone(), None, None);
    let app = App { settings, backend, access: None, sampler, mode: Mode { name: "bench", router: None } };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, skiff_web::app(Arc::new(app))).await });
    let client = Client::builder(TokioExecutor::new()).build_http();
    let index = format!("http://{addr}/models/?ns=default");

    for _ in 0..10 {
        load(&client, &index).await;
    }
    let mut times: Vec<Duration> = Vec::with_capacity(args.loads);
    for _ in 0..args.loads {
        times.push(load(&client, &index).await.0);
    }
    times.sort();
    println!(
        "index of {} InferenceServices, {} loads over loopback HTTP/1.1 (render + gzip + transfer):",
        args.services, args.loads
    );
    println!(
        "  median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3
    );

    println!("first page load, as transferred:");
    let mut total = 0;
    for path in ["/models/?ns=default", "/models/static/app.js", "/models/static/app.css"] {
        let (_, bytes, encoding) = load(&client, &format!("http://{addr}{path}")).await;
        println!("  {path:<24} {bytes:>8} bytes ({encoding})");
        total += bytes;
    }
    println!("  total                    {total:>8} bytes ({:.1} KB)", total as f64 / 1024.0);
    Ok(())
}
