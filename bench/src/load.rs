//! A closed-loop load generator: `connections` keep-alive HTTP/1.1 connections, each sending the
//! same request back to back, for a warm-up and then a measured period.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What to send and for how long.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// `host:port`.
    pub address: String,
    /// Request path.
    pub path: String,
    /// POST body (JSON).
    pub body: Bytes,
    /// Concurrent keep-alive connections.
    pub connections: usize,
    /// Unmeasured time first.
    pub warmup: Duration,
    /// Measured time.
    pub duration: Duration,
}

/// Figures of one measured period.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Successful (2xx) responses in the measured period.
    pub ok: u64,
    /// Non-2xx responses and connection errors in the measured period.
    pub errors: u64,
    /// Measured seconds.
    pub seconds: f64,
    /// Latencies of successful requests, in microseconds, sorted.
    pub latencies_us: Vec<u32>,
    /// Latencies of successful requests in an HDR histogram (microseconds, 3 significant digits);
    /// when present, [`Stats::quantile_ms`] reads it instead of `latencies_us`.
    pub histogram: Option<hdrhistogram::Histogram<u64>>,
    /// Failed requests by kind: the HTTP status, or the transport error.
    pub failures: std::collections::BTreeMap<String, u64>,
}

impl Stats {
    /// Successful requests per second.
    pub fn rps(&self) -> f64 {
        self.ok as f64 / self.seconds
    }

    /// The `q` quantile (0..=1) of latency in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if let Some(histogram) = &self.histogram {
            return if histogram.is_empty() { f64::NAN } else { histogram.value_at_quantile(q) as f64 / 1000.0 };
        }
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        let index = ((self.latencies_us.len() - 1) as f64 * q).round() as usize;
        f64::from(self.latencies_us[index]) / 1000.0
    }
}

/// Runs the load and returns the measured figures.
pub async fn run(spec: &LoadSpec) -> anyhow::Result<Stats> {
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let workers: Vec<_> =
        (0..spec.connections).map(|_| tokio::spawn(connection_loop(spec.clone(), measure_from, end))).collect();
    let mut stats = Stats { seconds: spec.duration.as_secs_f64(), ..Stats::default() };
    for worker in workers {
        let part = worker.await??;
        stats.ok += part.ok;
        stats.errors += part.errors;
        stats.latencies_us.extend(part.latencies_us);
        for (kind, n) in part.failures {
            *stats.failures.entry(kind).or_default() += n;
        }
    }
    stats.latencies_us.sort_unstable();
    Ok(stats)
}

async fn connection_loop(spec: LoadSpec, measure_from: Instant, end: Instant) -> anyhow::Result<Stats> {
    let mut stats = Stats::default();
    let mut sender = connect(&spec.address).await?;
    while Instant::now() < end {
        let request = Request::builder()
            .method(Method::POST)
            .uri(&spec.path)
            .header(http::header::HOST, &spec.address)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(spec.body.clone()))?;
        let sent = Instant::now();
        let outcome: Result<(), String> = match sender.send_request(request).await {
            Ok(response) => {
                let status = response.status();
                match response.into_body().collect().await {
                    Ok(_) if status.is_success() => Ok(()),
                    Ok(_) => Err(format!("HTTP {}", status.as_u16())),
                    Err(e) => Err(format!("body: {e}")),
                }
            }
            Err(e) => Err(format!("transport: {e}")),
        };
        let done = Instant::now();
        let ok = outcome.is_ok();
        if sent >= measure_from && done <= end {
            match outcome {
                Ok(()) => {
                    stats.ok += 1;
                    stats.latencies_us.push(u32::try_from(done.duration_since(sent).as_micros()).unwrap_or(u32::MAX));
                }
                Err(kind) => {
                    stats.errors += 1;
                    *stats.failures.entry(kind).or_default() += 1;
                }
            }
        }
        if !ok || sender.ready().await.is_err() {
            sender = connect(&spec.address).await?;
        }
    }
    Ok(stats)
}

/// Sends one POST on a new connection; returns the status and the time to the full response.
pub async fn once(address: &str, path: &str, body: Bytes) -> anyhow::Result<(http::StatusCode, Duration)> {
    let started = Instant::now();
    let mut sender = connect(address).await?;
    let request = Request::builder()
        .method(Method::POST)
        .uri(path)
        .header(http::header::HOST, address)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    Ok((status, started.elapsed()))
}

async fn connect(address: &str) -> anyhow::Result<http1::SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}
