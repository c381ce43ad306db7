//! The argument builders: `skiff-server`'s and the queue-proxy's command lines as typed values,
//! the only code that writes them (`skiff up` and the operator both start their pods through
//! these). The values are the binaries' own argument groups from `skiff_http::args` and
//! `skiff_http::logger`, which both binaries flatten into their parsers, so a value here means what
//! it means there; each builder's round trip through its binary's real parser (the tests of
//! `skiff-server` and `skiff-activator`, `tests/args.rs`) fails when a flag is renamed on one side.

use std::net::{IpAddr, SocketAddr};

pub use skiff_http::args::{AdmissionArgs, BatchingArgs, DrainArgs};
pub use skiff_http::logger::LoggerArgs;

use super::DEFAULT_TIMEOUT;

/// `skiff-server`'s command line for one model folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerArgs {
    /// The folder holding `model.onnx`.
    pub model_dir: String,
    /// The name the model is served as.
    pub model_name: String,
    /// The port for inference, health and metrics (0: a free one).
    pub http_port: u16,
    /// containerConcurrency and its queue.
    pub admission: AdmissionArgs,
    /// KServe's batcher.
    pub batching: BatchingArgs,
    /// The request logger (off without a URL).
    pub logger: LoggerArgs,
    /// The drain on SIGTERM.
    pub drain: DrainArgs,
    /// Where and how the process runs.
    pub process: ServerProcess,
}

/// Where and how a `skiff-server` process runs, whatever it serves: what each mode adds to a
/// revision's arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerProcess {
    /// The address to listen on (default: every address).
    pub bind: Option<IpAddr>,
    /// JSON log lines rather than text.
    pub json_logs: bool,
    /// The file why the server stopped on an error is written to.
    pub termination_message_path: Option<String>,
}

impl ServerArgs {
    /// Arguments serving the model in `model_dir` as `model_name` on `http_port`, with the
    /// server's defaults for everything else.
    pub fn new(model_name: &str, model_dir: &str, http_port: u16) -> ServerArgs {
        ServerArgs {
            model_dir: model_dir.to_owned(),
            model_name: model_name.to_owned(),
            http_port,
            admission: AdmissionArgs::default(),
            batching: BatchingArgs::default(),
            logger: LoggerArgs::default(),
            drain: DrainArgs::default(),
            process: ServerProcess::default(),
        }
    }

    /// The command line, after the program's name: the model, then each group's flags (only
    /// what differs from the server's defaults), then the process's.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec!["--model-dir".to_owned(), self.model_dir.clone(), "--model-name".to_owned()];
        args.extend([self.model_name.clone(), "--http-port".to_owned(), self.http_port.to_string()]);
        args.extend(self.admission.to_args());
        args.extend(self.batching.to_args());
        args.extend(self.logger.to_args());
        args.extend(self.drain.to_args());
        args.extend(self.process.to_args());
        args
    }
}

impl ServerProcess {
    /// The flags for what is set.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(path) = &self.termination_message_path {
            args.extend(["--termination-message-path".to_owned(), path.clone()]);
        }
        if let Some(bind) = self.bind {
            args.extend(["--bind".to_owned(), bind.to_string()]);
        }
        args.extend(log_format(self.json_logs));
        args
    }
}

/// The queue-proxy's command line (`skiff-activator queue-proxy`), in front of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueProxyArgs {
    /// The port for proxied requests, `/metrics` and `/healthz` (0: a free one).
    pub port: u16,
    /// The address to listen on (default: every address).
    pub bind: Option<IpAddr>,
    /// The container it fronts.
    pub upstream: SocketAddr,
    /// containerConcurrency and its queue.
    pub admission: AdmissionArgs,
    /// The bound on a whole request, in seconds (the InferenceService's `timeout`).
    pub timeout_secs: u64,
    /// The drain on SIGTERM.
    pub drain: DrainArgs,
    /// KServe's batcher, for the container.
    pub batching: BatchingArgs,
    /// The request logger, for the container (off without a URL).
    pub logger: LoggerArgs,
    /// The container's path whose 2xx answer means ready.
    pub readiness_path: Option<String>,
    /// JSON log lines rather than text.
    pub json_logs: bool,
}

impl Default for QueueProxyArgs {
    /// Knative's port 8012 in front of `127.0.0.1:8080`, KServe's timeout, the defaults of each
    /// group.
    fn default() -> QueueProxyArgs {
        QueueProxyArgs {
            port: 8012,
            bind: None,
            upstream: SocketAddr::from(([127, 0, 0, 1], 8080)),
            admission: AdmissionArgs::default(),
            timeout_secs: DEFAULT_TIMEOUT.as_secs(),
            drain: DrainArgs::default(),
            batching: BatchingArgs::default(),
            logger: LoggerArgs::default(),
            readiness_path: None,
            json_logs: false,
        }
    }
}

impl QueueProxyArgs {
    /// The command line, after the program's name: the `queue-proxy` subcommand, its port,
    /// upstream and timeout (always, the revision decides them), then each group's flags (only
    /// what differs from the defaults) and what else is set.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec!["queue-proxy".to_owned(), "--port".to_owned(), self.port.to_string()];
        if let Some(bind) = self.bind {
            args.extend(["--bind".to_owned(), bind.to_string()]);
        }
        args.extend(["--upstream".to_owned(), self.upstream.to_string()]);
        args.extend(self.admission.to_args());
        args.extend(["--timeout-secs".to_owned(), self.timeout_secs.to_string()]);
        args.extend(self.drain.to_args());
        args.extend(self.batching.to_args());
        args.extend(self.logger.to_args());
        if let Some(path) = &self.readiness_path {
            args.extend(["--readiness-path".to_owned(), path.clone()]);
        }
        args.extend(log_format(self.json_logs));
        args
    }
}

/// `--log-format json` for JSON lines; nothing for text, the default of both binaries.
fn log_format(json: bool) -> Vec<String> {
    if json { vec!["--log-format".to_owned(), "json".to_owned()] } else { Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_write_only_what_each_binary_needs() {
        assert_eq!(
            ServerArgs::new("iris", "/m", 8080).to_args().join(" "),
            "--model-dir /m --model-name iris --http-port 8080"
        );
        assert_eq!(
            QueueProxyArgs::default().to_args().join(" "),
            "queue-proxy --port 8012 --upstream 127.0.0.1:8080 --timeout-secs 300"
        );
    }

    #[test]
    fn a_local_process_listens_on_loopback_and_logs_json() {
        let process = ServerProcess {
            bind: Some(IpAddr::from([127, 0, 0, 1])),
            json_logs: true,
            termination_message_path: Some("/tmp/r/termination".into()),
        };
        assert_eq!(
            process.to_args().join(" "),
            "--termination-message-path /tmp/r/termination --bind 127.0.0.1 --log-format json"
        );
    }
}
