//! The queue-proxy's command line, its defaults and its validation.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http::uri::PathAndQuery;

use skiff_http::args::{AdmissionArgs, BatchingArgs, DrainArgs};
use skiff_http::logger::{LoggerArgs, LoggerConfig};
use skiff_http::{ServeLimits, check_secs};

use super::batcher::BatchSettings;

use crate::body::MAX_BODY_BYTES;
use crate::error::{Error, Result};

/// Request-body bytes the queue-proxy holds at once by default.
pub const DEFAULT_MAX_HELD_BYTES: usize = 256 * 1024 * 1024;

/// Everything `skiff-activator queue-proxy` can be told.
#[derive(Debug, Clone, clap::Args)]
pub struct QueueProxyConfig {
    /// Port for proxied requests, `/metrics` and `/healthz` (Knative's queue-proxy uses 8012).
    #[arg(long, default_value_t = 8012)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// The container being fronted.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub upstream: SocketAddr,
    /// Requests sent to the container at once, and those that may wait for a slot.
    #[command(flatten)]
    pub admission: AdmissionArgs,
    /// Bound on a whole request, queueing included (the InferenceService's `timeout`).
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// The drain after SIGTERM.
    #[command(flatten)]
    pub drain: DrainArgs,
    /// Request-body bytes held at once (queued or being sent) before 503 with Retry-After.
    #[arg(long, default_value_t = DEFAULT_MAX_HELD_BYTES)]
    pub max_held_bytes: usize,
    /// Path on the container whose 2xx answer means ready; without it, ready means it accepts connections.
    #[arg(long)]
    pub readiness_path: Option<String>,
    /// Combine concurrent V1 `:predict` requests into one request to the container (KServe
    /// `predictor.batcher`, see [`super::batcher`]).
    #[command(flatten)]
    pub batching: BatchingArgs,
    /// The request logger (KServe `predictor.logger`), the flags `skiff-server` takes.
    #[command(flatten)]
    pub logger: LoggerArgs,
}

impl Default for QueueProxyConfig {
    fn default() -> Self {
        QueueProxyConfig {
            port: 8012,
            bind: IpAddr::from([0, 0, 0, 0]),
            upstream: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admission: AdmissionArgs::default(),
            timeout_secs: skiff_api::serving::DEFAULT_TIMEOUT.as_secs(),
            drain: DrainArgs::default(),
            max_held_bytes: DEFAULT_MAX_HELD_BYTES,
            readiness_path: None,
            batching: BatchingArgs::default(),
            logger: LoggerArgs::default(),
        }
    }
}

impl QueueProxyConfig {
    /// Checks the values that clap cannot; each message states the allowed range.
    pub fn validate(&self) -> Result<()> {
        if self.timeout_secs == 0 {
            return Err(Error::Config("--timeout-secs must be at least 1".into()));
        }
        check_secs("timeout-secs", self.timeout_secs).map_err(Error::Config)?;
        self.drain.validate().map_err(Error::Config)?;
        self.admission.validate().map_err(Error::Config)?;
        if self.max_held_bytes < MAX_BODY_BYTES {
            return Err(Error::Config(format!(
                "--max-held-bytes {} must be at least the largest body, {MAX_BODY_BYTES}",
                self.max_held_bytes
            )));
        }
        self.batching.validate().map_err(Error::Config)?;
        self.logger_config()?;
        self.readiness_path().map(|_| ())
    }

    /// The batcher's settings, when batching is on.
    pub fn batching(&self) -> Option<BatchSettings> {
        self.batching.enable_batching.then(|| BatchSettings {
            max_batch_size: self.batching.max_batch_size,
            max_latency: self.batching.max_latency(),
        })
    }

    /// The request logger's config, when `--logger-url` is set.
    pub fn logger_config(&self) -> Result<Option<LoggerConfig>> {
        self.logger.config().map_err(Error::Config)
    }

    /// Connections, client phases and the drain.
    pub fn serve_limits(&self) -> ServeLimits {
        self.drain.limits(ServeLimits::default())
    }

    /// Bound on a whole request.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// The readiness path, parsed.
    pub fn readiness_path(&self) -> Result<Option<PathAndQuery>> {
        let Some(path) = &self.readiness_path else { return Ok(None) };
        match path.parse::<PathAndQuery>() {
            Ok(parsed) if path.starts_with('/') => Ok(Some(parsed)),
            _ => Err(Error::Config(format!("--readiness-path {path:?} must be a path starting with '/'"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: QueueProxyConfig,
    }

    fn parse(args: &[&str]) -> Result<QueueProxyConfig, String> {
        let cli = Cli::try_parse_from(std::iter::once("queue-proxy").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.config.validate().map_err(|e| e.to_string())?;
        Ok(cli.config)
    }

    #[test]
    fn defaults_follow_knative_and_skiff_server() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.port, 8012);
        assert_eq!(c.upstream, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!((c.admission.container_concurrency, c.admission.max_queued()), (0, 0));
        assert_eq!(c.timeout(), Duration::from_secs(300));
        let c = parse(&["--port", "9000", "--upstream", "127.0.0.1:9001", "--container-concurrency", "4"]).unwrap();
        assert_eq!((c.port, c.admission.max_queued()), (9000, 40));
        assert_eq!(parse(&["--container-concurrency", "4", "--max-queued", "3"]).unwrap().admission.max_queued(), 3);
        let (d, p) = (QueueProxyConfig::default(), parse(&[]).unwrap());
        assert_eq!((d.port, d.bind, d.upstream, d.timeout_secs), (p.port, p.bind, p.upstream, p.timeout_secs));
        assert_eq!((d.admission.container_concurrency, d.admission.max_queued), (0, None));
        assert_eq!((&d.admission, &d.drain, d.max_held_bytes), (&p.admission, &p.drain, p.max_held_bytes));
        let b = &d.batching;
        assert_eq!((b.enable_batching, b.max_batch_size, b.max_latency_ms), (false, 32, 500));
        assert_eq!(d.batching, p.batching);
        assert_eq!((d.logger.logger_mode.as_str(), d.logger.component.as_str()), ("all", "predictor"));
        assert_eq!((p.logger.logger_mode.as_str(), p.logger.component.as_str()), ("all", "predictor"));
        assert!(d.batching().is_none() && d.logger_config().unwrap().is_none());
    }

    #[test]
    fn batching_and_the_logger_follow_their_flags() {
        let c = parse(&["--enable-batching", "--max-batch-size", "4", "--max-latency-ms", "20"]).unwrap();
        let batching = c.batching().unwrap();
        assert_eq!((batching.max_batch_size, batching.max_latency), (4, Duration::from_millis(20)));
        let c = parse(&["--logger-url", "http://sink.models/events", "--logger-mode", "response", "--revision", "r-1"])
            .unwrap();
        let logger = c.logger_config().unwrap().unwrap();
        assert_eq!((logger.url.to_string().as_str(), logger.revision.as_str()), ("http://sink.models/events", "r-1"));
        assert_eq!(logger.mode, skiff_http::logger::LogMode::Response);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        assert_eq!(
            parse(&["--timeout-secs", "0"]).unwrap_err(),
            "invalid configuration: --timeout-secs must be at least 1"
        );
        let err = parse(&["--readiness-path", "ready"]).unwrap_err();
        assert!(err.contains("must be a path starting with '/'"), "{err}");
        let c = parse(&["--readiness-path", "/v2/health/ready"]).unwrap();
        assert_eq!(c.readiness_path().unwrap().unwrap().as_str(), "/v2/health/ready");
        assert!(parse(&["--upstream", "localhost"]).is_err());
        assert_eq!(
            parse(&["--timeout-secs", "9223372036854775808"]).unwrap_err(),
            "invalid configuration: --timeout-secs 9223372036854775808 is more than 86400 (a day)"
        );
        assert_eq!(
            parse(&["--container-concurrency", "1152921504606846976"]).unwrap_err(),
            "invalid configuration: --container-concurrency 1152921504606846976 is more than 16777216"
        );
        assert_eq!(
            parse(&["--enable-batching", "--max-latency-ms", "0"]).unwrap_err(),
            "invalid configuration: --max-latency-ms must be at least 1 when batching is on"
        );
        assert!(parse(&["--enable-batching", "--max-batch-size", "0"]).is_err());
        assert!(parse(&["--max-latency-ms", "0"]).is_ok(), "unchecked while batching is off");
        let err = parse(&["--logger-url", "https://sink"]).unwrap_err();
        assert!(err.contains("--logger-url"), "{err}");
        let err = parse(&["--logger-url", "http://sink", "--logger-mode", "some"]).unwrap_err();
        assert!(err.contains("--logger-mode"), "{err}");
        let err = parse(&["--max-held-bytes", "1024"]).unwrap_err();
        assert!(err.contains("--max-held-bytes 1024 must be at least the largest body"), "{err}");
    }
}
