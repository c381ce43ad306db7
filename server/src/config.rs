//! The server's command line, its defaults and its validation.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use skiff_http::args::{AdmissionArgs, BatchingArgs, DrainArgs};
use skiff_http::logger::LoggerArgs;
use skiff_http::{ServeLimits, check_secs};

use crate::error::{Error, Result};
use crate::model::{BatchConfig, LoadOptions};

/// Jobs that may wait for an inference thread, per model, before requests get 503.
const INFERENCE_QUEUE: usize = 4096;

pub use skiff_http::telemetry::LogFormat;

/// `skiff-server`'s command line, as its `main` parses it (and the argument builder's round trip,
/// `tests/args.rs`, and `skiff up`'s preflight read it).
#[derive(Debug, clap::Parser)]
#[command(name = "skiff-server", version, about = "Serve ONNX models over KServe's V1 and V2 inference protocols")]
pub struct Cli {
    /// Everything it can be told.
    #[command(flatten)]
    pub config: ServerConfig,
}

/// Everything `skiff-server` can be told on its command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerConfig {
    /// Folder holding `model.onnx`, or sub-folders that each hold one.
    #[arg(long, required_unless_present = "storage_uri", conflicts_with = "storage_uri")]
    pub model_dir: Option<PathBuf>,
    /// The same folder as a `file://` URI (KServe's `storageUri`).
    #[arg(long)]
    pub storage_uri: Option<String>,
    /// Model name when the folder holds `model.onnx` itself (default: the folder's name).
    #[arg(long)]
    pub model_name: Option<String>,
    /// HTTP port for inference, health and metrics.
    #[arg(long, default_value_t = 8080)]
    pub http_port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// Inference requests processed at once, and those that may wait for a slot.
    #[command(flatten)]
    pub admission: AdmissionArgs,
    /// Largest request body in bytes; larger ones get 413.
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Inference threads per model, each with its own session (default: the number of CPUs).
    #[arg(long)]
    pub workers: Option<usize>,
    /// ONNX Runtime intra-op threads per session.
    #[arg(long, default_value_t = 1)]
    pub intra_op_threads: usize,
    /// Folder of the models' cached forms: the optimized graph in ORT format, written the first
    /// time a model loads and loaded in place on later starts (`off`, or unset: none).
    #[arg(long, env = "SKIFF_ORT_CACHE_DIR")]
    pub ort_cache_dir: Option<PathBuf>,
    /// ONNX Runtime's prepacking of weights (shared by a model's sessions): `true` or `false`. Off
    /// by default: prepacking copies every packable weight at each start (a 1 GiB MatMul's cached
    /// form loads in 0.6 s without it, 12 s with it, and holds 1 GiB instead of 3), for a faster
    /// run only where a kernel gains from packed weights (docs/benchmarks.md, issue 37).
    #[arg(long, env = "SKIFF_ORT_PREPACKING", default_value_t = false, action = clap::ArgAction::Set)]
    pub prepacking: bool,
    /// Stack concurrent requests to a model into one run (KServe `batcher`).
    #[command(flatten)]
    pub batching: BatchingArgs,
    /// Connections held at once; past it new connections wait in the listen backlog.
    #[arg(long, default_value_t = 10_000)]
    pub max_connections: usize,
    /// Seconds a connection may take to send a request's headers, counted from when it has nothing
    /// in flight (so it also bounds idle keep-alive).
    #[arg(long, default_value_t = 20)]
    pub header_timeout_secs: u64,
    /// Seconds a request body may take to arrive; slower ones get 408.
    #[arg(long, default_value_t = 60)]
    pub body_timeout_secs: u64,
    /// Bytes of request bodies and their decoded tensors held at once; past it, 503 with Retry-After.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub max_buffered_bytes: usize,
    /// The drain after SIGTERM (`--drain-delay-secs`, which `--shutdown-delay-secs` still names).
    #[command(flatten)]
    pub drain: DrainArgs,
    /// Path of ONNX Runtime's shared library; by default next to this binary, or where
    /// `scripts/setup.sh` installs it in the checkout this binary was built in.
    #[arg(long, env = "ORT_DYLIB_PATH")]
    pub ort_dylib: Option<PathBuf>,
    /// File the reason is written to when the server stops on an error (a model that cannot be
    /// loaded): Kubernetes' `terminationMessagePath`, read by `skiff up` as well.
    #[arg(long, env = "SKIFF_TERMINATION_MESSAGE_PATH")]
    pub termination_message_path: Option<PathBuf>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The request logger (KServe `predictor.logger`).
    #[command(flatten)]
    pub logger: LoggerArgs,
}

impl ServerConfig {
    /// Checks the values that clap cannot; each message states the allowed range.
    pub fn validate(&self) -> Result<()> {
        let positive = |value: usize, flag: &str| {
            if value == 0 { Err(Error::Config(format!("--{flag} must be at least 1"))) } else { Ok(()) }
        };
        positive(self.intra_op_threads, "intra-op-threads")?;
        positive(self.max_body_bytes, "max-body-bytes")?;
        positive(self.max_connections, "max-connections")?;
        if self.max_buffered_bytes < self.max_body_bytes {
            return Err(Error::Config(format!(
                "--max-buffered-bytes {} must be at least --max-body-bytes {}",
                self.max_buffered_bytes, self.max_body_bytes
            )));
        }
        for (flag, secs) in
            [("header-timeout-secs", self.header_timeout_secs), ("body-timeout-secs", self.body_timeout_secs)]
        {
            if secs == 0 {
                return Err(Error::Config(format!("--{flag} must be at least 1")));
            }
            check_secs(flag, secs).map_err(Error::Config)?;
        }
        self.drain.validate().map_err(Error::Config)?;
        self.admission.validate().map_err(Error::Config)?;
        if let Some(workers) = self.workers {
            positive(workers, "workers")?;
        }
        self.batching.validate().map_err(Error::Config)?;
        self.logger.config().map_err(Error::Config)?;
        self.model_dir().map(|_| ())
    }

    /// The model folder, from `--model-dir` or a `file://` `--storage-uri`.
    pub fn model_dir(&self) -> Result<PathBuf> {
        match (&self.model_dir, &self.storage_uri) {
            (Some(dir), _) => Ok(dir.clone()),
            (None, Some(uri)) => uri.strip_prefix("file://").map(PathBuf::from).ok_or_else(|| {
                Error::Config(format!(
                    "--storage-uri {uri}: only file:// URIs are served directly (other schemes need a storage initializer)"
                ))
            }),
            (None, None) => Err(Error::Config("give --model-dir or --storage-uri".into())),
        }
    }

    /// The ONNX Runtime library to load: `--ort-dylib` / `ORT_DYLIB_PATH`, else found
    /// ([`crate::onnxruntime::locate`]).
    pub fn ort_dylib(&self) -> Result<PathBuf> {
        crate::onnxruntime::locate(self.ort_dylib.clone())
    }

    /// The bounds on connections and client phases, and the drain.
    pub fn serve_limits(&self) -> ServeLimits {
        self.drain.limits(ServeLimits {
            max_connections: self.max_connections,
            header_timeout: Duration::from_secs(self.header_timeout_secs),
            body_timeout: Duration::from_secs(self.body_timeout_secs),
            ..ServeLimits::default()
        })
    }

    /// How models are loaded and run.
    pub fn load_options(&self) -> LoadOptions {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        LoadOptions {
            workers: self.workers.unwrap_or(cpus),
            intra_threads: self.intra_op_threads,
            batching: self.batching.enable_batching.then_some(BatchConfig {
                max_batch_size: self.batching.max_batch_size,
                max_latency: self.batching.max_latency(),
            }),
            queue: INFERENCE_QUEUE,
            max_batch_size: self.batching.max_batch_size,
            prepacking: self.prepacking,
            compiled: None,
        }
    }

    /// The cached forms' folder, unless it is unset, empty or `off`.
    pub fn ort_cache_dir(&self) -> Option<PathBuf> {
        self.ort_cache_dir.clone().filter(|d| !d.as_os_str().is_empty() && d.as_os_str() != "off")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<ServerConfig, String> {
        let cli = Cli::try_parse_from(std::iter::once("skiff-server").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.config.validate().map_err(|e| e.to_string())?;
        Ok(cli.config)
    }

    #[test]
    fn defaults_follow_kserve_and_knative() {
        let c = parse(&["--model-dir", "m"]).unwrap();
        assert_eq!(c.http_port, 8080);
        assert_eq!(c.max_body_bytes, 32 * 1024 * 1024);
        assert_eq!(c.admission.container_concurrency, 0);
        assert!(c.load_options().batching.is_none());
        let c = parse(&["--model-dir", "m", "--container-concurrency", "4"]).unwrap();
        assert_eq!(c.admission.max_queued(), 40);
    }

    #[test]
    fn storage_uri_is_a_file_path() {
        let c = parse(&["--storage-uri", "file:///models/iris"]).unwrap();
        assert_eq!(c.model_dir().unwrap(), PathBuf::from("/models/iris"));
        let err = parse(&["--storage-uri", "gs://bucket/iris"]).unwrap_err();
        assert!(err.contains("only file:// URIs are served directly"), "{err}");
        assert!(parse(&["--model-dir", "a", "--storage-uri", "file:///b"]).is_err());
        assert!(parse(&[]).is_err());
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let err = parse(&["--model-dir", "m", "--workers", "0"]).unwrap_err();
        assert_eq!(err, "invalid configuration: --workers must be at least 1");
        assert!(parse(&["--model-dir", "m", "--enable-batching", "--max-latency-ms", "0"]).is_err());
        let err = parse(&["--model-dir", "m", "--container-concurrency", "1152921504606846976"]).unwrap_err();
        assert_eq!(err, "invalid configuration: --container-concurrency 1152921504606846976 is more than 16777216");
        let err = parse(&["--model-dir", "m", "--drain-timeout-secs", "9223372036854775808"]).unwrap_err();
        assert_eq!(err, "invalid configuration: --drain-timeout-secs 9223372036854775808 is more than 86400 (a day)");
        let err = parse(&["--model-dir", "m", "--header-timeout-secs", "0"]).unwrap_err();
        assert_eq!(err, "invalid configuration: --header-timeout-secs must be at least 1");
        let err = parse(&["--model-dir", "m", "--max-buffered-bytes", "1024"]).unwrap_err();
        assert!(err.contains("--max-buffered-bytes 1024 must be at least --max-body-bytes"), "{err}");
    }
}
