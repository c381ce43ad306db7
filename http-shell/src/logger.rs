//! KServe's request logger (`predictor.logger`): each inference request and/or response sent to a
//! sink as a CloudEvent in HTTP binary mode (`ce-*` headers, the body as it was on the wire).
//! Inference only hands an event to a bounded queue, bounded in events and in bytes, and a
//! background task sends it, a few at a time, each under a timeout. A full queue drops the event.
//! Drops, failures and sends are counted, and a slow or failing sink never slows or fails an
//! inference. Where events may go is [`sink::SinkPolicy`]'s rule: checked on the URL when the
//! logger is configured, and on every address the sink's name resolves to before connecting.

pub mod sink;

use std::fmt;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Uri};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::{Semaphore, mpsc};

use self::sink::SinkPolicy;

/// `ce-type` of a logged request.
pub const REQUEST_TYPE: &str = "org.kubeflow.serving.inference.request";
/// `ce-type` of a logged response.
pub const RESPONSE_TYPE: &str = "org.kubeflow.serving.inference.response";

/// What is logged (`logger.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// Requests and responses.
    All,
    /// Requests only.
    Request,
    /// Responses only.
    Response,
}

impl FromStr for LogMode {
    type Err = String;

    fn from_str(mode: &str) -> Result<LogMode, String> {
        match mode {
            "all" => Ok(LogMode::All),
            "request" => Ok(LogMode::Request),
            "response" => Ok(LogMode::Response),
            other => Err(format!("logger mode must be all, request or response, not {other:?}")),
        }
    }
}

/// Which half of an inference an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Half {
    /// The request.
    Request,
    /// The response.
    Response,
}

/// Where events go and what they say about who sent them.
#[derive(Debug, Clone)]
pub struct LoggerConfig {
    /// The sink (`http://` only).
    pub url: Uri,
    /// What is logged.
    pub mode: LogMode,
    /// `ce-source`.
    pub source: String,
    /// `ce-inferenceservicename`.
    pub inference_service: String,
    /// `ce-namespace`.
    pub namespace: String,
    /// `ce-component` (`predictor`, `transformer`, ...).
    pub component: String,
    /// `ce-revision`: the revision that answered.
    pub revision: String,
    /// Most events waiting to be sent.
    pub max_queued_events: usize,
    /// Most body bytes waiting to be sent.
    pub max_queued_bytes: usize,
    /// Sends in flight at once.
    pub concurrency: usize,
    /// Time allowed for one send.
    pub timeout: Duration,
    /// Which sinks are allowed (checked again on every address the sink's name resolves to).
    pub sinks: SinkPolicy,
}

impl LoggerConfig {
    /// A config for `url` and `mode` with the default bounds (1024 events, 64 MiB, 8 sends in
    /// flight, 10 s per send), the strict sink rule (no loopback, no link-local) and no identity yet.
    pub fn new(url: Uri, mode: LogMode) -> LoggerConfig {
        LoggerConfig {
            url,
            mode,
            source: String::new(),
            inference_service: String::new(),
            namespace: String::new(),
            component: "predictor".into(),
            revision: String::new(),
            max_queued_events: 1024,
            max_queued_bytes: 64 << 20,
            concurrency: 8,
            timeout: Duration::from_secs(10),
            sinks: SinkPolicy::default(),
        }
    }
}

/// The logger's command-line flags, the same for `skiff-server` and the queue-proxy.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct LoggerArgs {
    /// The request logger's sink (KServe `logger.url`, `http://` only); none: nothing is logged.
    #[arg(long)]
    pub logger_url: Option<String>,
    /// What the logger sends: all, request or response (KServe `logger.mode`).
    #[arg(long, default_value = "all")]
    pub logger_mode: String,
    /// The logger's `ce-source`.
    #[arg(long, default_value = "")]
    pub logger_source: String,
    /// The InferenceService served, for the logger's events.
    #[arg(long, default_value = "")]
    pub inference_service: String,
    /// Its namespace, for the logger's events.
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// The component served (predictor, transformer, explainer), for the logger's events.
    #[arg(long, default_value = "predictor")]
    pub component: String,
    /// The revision served, for the logger's events.
    #[arg(long, default_value = "")]
    pub revision: String,
    /// Sinks on loopback are allowed (`skiff up`); otherwise loopback is refused, as on a cluster.
    #[arg(long)]
    pub logger_allow_loopback: bool,
    /// Hosts of the platform's own components the logger refuses (names, `*.suffix`, addresses,
    /// CIDR blocks; comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub logger_protected_hosts: Vec<String>,
    /// Hosts the logger may send to even when the rule refuses them (inferenceservice-config
    /// `logger.allowedHosts`; comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub logger_allowed_hosts: Vec<String>,
}

impl Default for LoggerArgs {
    /// The parser's defaults: no logger; mode `all`, component `predictor`.
    fn default() -> LoggerArgs {
        LoggerArgs {
            logger_url: None,
            logger_mode: "all".into(),
            logger_source: String::new(),
            inference_service: String::new(),
            namespace: String::new(),
            component: "predictor".into(),
            revision: String::new(),
            logger_allow_loopback: false,
            logger_protected_hosts: Vec::new(),
            logger_allowed_hosts: Vec::new(),
        }
    }
}

impl LoggerArgs {
    /// These flags with `sinks`' rule (loopback, protected and allowed hosts) in place of theirs.
    pub fn with_sinks(self, sinks: &SinkPolicy) -> LoggerArgs {
        let (logger_allow_loopback, logger_protected_hosts, logger_allowed_hosts) = sinks.to_flags();
        LoggerArgs { logger_allow_loopback, logger_protected_hosts, logger_allowed_hosts, ..self }
    }

    /// The flags that give these values: none without a URL (the logger is off, and the rest
    /// unused); with one, the URL and each other value that is set (a text that is not empty, the
    /// loopback switch when on, a list that is not empty, joined with commas).
    pub fn to_args(&self) -> Vec<String> {
        let Some(url) = &self.logger_url else { return Vec::new() };
        let mut args = vec!["--logger-url".to_owned(), url.clone()];
        let texts = [
            ("--logger-mode", &self.logger_mode),
            ("--logger-source", &self.logger_source),
            ("--inference-service", &self.inference_service),
            ("--namespace", &self.namespace),
            ("--component", &self.component),
            ("--revision", &self.revision),
        ];
        for (flag, text) in texts {
            if !text.is_empty() {
                crate::args::push(&mut args, flag, text);
            }
        }
        if self.logger_allow_loopback {
            args.push("--logger-allow-loopback".to_owned());
        }
        for (flag, hosts) in [
            ("--logger-protected-hosts", &self.logger_protected_hosts),
            ("--logger-allowed-hosts", &self.logger_allowed_hosts),
        ] {
            if !hosts.is_empty() {
                crate::args::push(&mut args, flag, hosts.join(","));
            }
        }
        args
    }

    /// The logger's config, `None` without `--logger-url`; an error names the flag.
    pub fn config(&self) -> Result<Option<LoggerConfig>, String> {
        let Some(url) = &self.logger_url else { return Ok(None) };
        let sinks = SinkPolicy::from_flags(
            self.logger_allow_loopback,
            &self.logger_protected_hosts,
            &self.logger_allowed_hosts,
        )
        .map_err(|e| format!("--logger-protected-hosts/--logger-allowed-hosts: {e}"))?;
        sinks.check_url(url).map_err(|e| format!("--logger-url {url:?}: {e}"))?;
        let uri: Uri = url.parse().map_err(|e| format!("--logger-url {url:?}: {e}"))?;
        let mode = self.logger_mode.parse().map_err(|e| format!("--logger-mode: {e}"))?;
        Ok(Some(LoggerConfig {
            source: self.logger_source.clone(),
            inference_service: self.inference_service.clone(),
            namespace: self.namespace.clone(),
            component: self.component.clone(),
            revision: self.revision.clone(),
            sinks,
            ..LoggerConfig::new(uri, mode)
        }))
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The logger's counters: events sent (2xx from the sink), failed (no answer, an error status or
/// past the timeout) and dropped (the queue was full, or a streamed body was too large to keep).
#[derive(Debug, Clone, Default)]
pub struct LoggerMetrics {
    events: Family<OutcomeLabels, Counter>,
}

impl LoggerMetrics {
    /// Registers `skiff_logger_events{outcome=sent|failed|dropped}`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "skiff_logger_events",
            "Request logger CloudEvents, by outcome: sent, failed (sink error or timeout), dropped (queue full, or a \
             streamed body too large to keep)",
            self.events.clone(),
        );
    }

    /// Events with `outcome` so far.
    pub fn count(&self, outcome: &'static str) -> u64 {
        self.events.get_or_create(&OutcomeLabels { outcome }).get()
    }

    fn inc(&self, outcome: &'static str) {
        self.events.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

struct Event {
    half: Half,
    id: String,
    content_type: HeaderValue,
    body: Bytes,
}

/// The handle inference code logs through; cheap to clone.
#[derive(Clone)]
pub struct Logger {
    queue: mpsc::Sender<Event>,
    mode: LogMode,
    queued_bytes: Arc<AtomicUsize>,
    max_queued_bytes: usize,
    metrics: LoggerMetrics,
}

impl fmt::Debug for Logger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Logger").field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl Logger {
    /// Starts the sending task on the current tokio runtime.
    pub fn start(config: LoggerConfig, metrics: LoggerMetrics) -> Logger {
        let (queue, events) = mpsc::channel(config.max_queued_events.max(1));
        let logger = Logger {
            queue,
            mode: config.mode,
            queued_bytes: Arc::new(AtomicUsize::new(0)),
            max_queued_bytes: config.max_queued_bytes,
            metrics,
        };
        tokio::spawn(send_all(events, Arc::new(config), logger.queued_bytes.clone(), logger.metrics.clone()));
        logger
    }

    /// Whether `half` is logged in this mode.
    pub fn logs(&self, half: Half) -> bool {
        match (self.mode, half) {
            (LogMode::All, _) | (LogMode::Request, Half::Request) | (LogMode::Response, Half::Response) => true,
            (LogMode::Request, Half::Response) | (LogMode::Response, Half::Request) => false,
        }
    }

    /// Counts an event that was not kept, as dropped: a streamed body past what the caller keeps
    /// for the logger.
    pub fn count_dropped(&self) {
        self.metrics.inc("dropped");
    }

    /// Queues `half` of inference `id` when the mode logs it; never waits. Dropped and counted
    /// when the queue is full in events or bytes.
    pub fn log(&self, half: Half, id: &str, content_type: HeaderValue, body: Bytes) {
        if !self.logs(half) {
            return;
        }
        let size = body.len();
        let held = self.queued_bytes.fetch_add(size, Ordering::AcqRel);
        if held + size > self.max_queued_bytes {
            self.queued_bytes.fetch_sub(size, Ordering::AcqRel);
            self.metrics.inc("dropped");
            return;
        }
        let event = Event { half, id: id.to_owned(), content_type, body };
        if self.queue.try_send(event).is_err() {
            self.queued_bytes.fetch_sub(size, Ordering::AcqRel);
            self.metrics.inc("dropped");
        }
    }
}

/// Sends queued events until every [`Logger`] handle is gone, `concurrency` at a time.
async fn send_all(
    mut events: mpsc::Receiver<Event>,
    config: Arc<LoggerConfig>,
    queued_bytes: Arc<AtomicUsize>,
    metrics: LoggerMetrics,
) {
    let sinks = Arc::new(config.sinks.clone());
    // An address literal is not resolved: the rule judges it here, once.
    let refused = config.url.host().map(|host| sinks.check_host(host)).transpose().err();
    if let Some(why) = &refused {
        tracing::warn!(url = %config.url, "the request logger's sink is refused, nothing is sent: {why}");
    }
    let connector = HttpConnector::new_with_resolver(CheckedResolver { sinks });
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let slots = Arc::new(Semaphore::new(config.concurrency.max(1)));
    while let Some(event) = events.recv().await {
        if refused.is_some() {
            queued_bytes.fetch_sub(event.body.len(), Ordering::AcqRel);
            metrics.inc("failed");
            continue;
        }
        let slot = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
        let (client, config, queued_bytes, metrics) =
            (client.clone(), config.clone(), queued_bytes.clone(), metrics.clone());
        tokio::spawn(async move {
            let size = event.body.len();
            let sent = tokio::time::timeout(config.timeout, client.request(cloud_event(&config, event))).await;
            queued_bytes.fetch_sub(size, Ordering::AcqRel);
            match sent {
                Ok(Ok(answer)) if answer.status().is_success() => metrics.inc("sent"),
                Ok(Ok(answer)) => {
                    tracing::debug!(status = %answer.status(), "the logger's sink refused an event");
                    metrics.inc("failed");
                }
                Ok(Err(e)) => {
                    match refusal(&e) {
                        Some(why) => tracing::warn!(error = %why, "the request logger's sink is refused"),
                        None => tracing::debug!(error = %e, "the logger's sink could not be reached"),
                    }
                    metrics.inc("failed");
                }
                Err(_) => metrics.inc("failed"),
            }
            drop(slot);
        });
    }
}

/// Resolves the sink's name and refuses it when any address it resolves to is refused by the
/// [`SinkPolicy`] (a name pointing at 169.254.169.254 or 127.0.0.1 is refused as those are).
#[derive(Clone)]
struct CheckedResolver {
    sinks: Arc<SinkPolicy>,
}

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let sinks = self.sinks.clone();
        Box::pin(async move {
            let host = name.as_str();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
            for addr in &addrs {
                sinks
                    .check_addr(host, addr.ip())
                    .map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))?;
            }
            Ok(addrs.into_iter())
        })
    }
}

/// The [`CheckedResolver`]'s refusal somewhere in `error`'s causes.
fn refusal<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a io::Error> {
    let mut cause = error.source();
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<io::Error>().filter(|io| io.kind() == io::ErrorKind::PermissionDenied) {
            return Some(io);
        }
        cause = e.source();
    }
    None
}

/// The event as a binary-mode CloudEvents HTTP request.
fn cloud_event(config: &LoggerConfig, event: Event) -> Request<Full<Bytes>> {
    let kind = match event.half {
        Half::Request => REQUEST_TYPE,
        Half::Response => RESPONSE_TYPE,
    };
    let mut request = Request::builder().method(Method::POST).uri(config.url.clone());
    let attributes = [
        ("ce-specversion", "1.0"),
        ("ce-id", event.id.as_str()),
        ("ce-type", kind),
        ("ce-source", config.source.as_str()),
        ("ce-inferenceservicename", config.inference_service.as_str()),
        ("ce-namespace", config.namespace.as_str()),
        ("ce-component", config.component.as_str()),
        ("ce-revision", config.revision.as_str()),
    ];
    for (name, value) in attributes {
        if let Ok(value) = HeaderValue::from_str(value) {
            request = request.header(name, value);
        }
    }
    request
        .header(CONTENT_TYPE, event.content_type)
        .body(Full::new(event.body))
        .expect("a POST with valid headers is a valid request")
}

#[cfg(test)]
mod tests {
    use tower_service::Service;

    use super::*;

    /// A name is resolved for real (getaddrinfo; `localhost` resolves everywhere), and every address
    /// it gives is judged: refused with the cluster's rule, given back with `skiff up`'s.
    #[tokio::test]
    async fn the_resolver_judges_what_a_name_resolves_to() {
        let name: Name = "localhost".parse().unwrap();
        let cluster = SinkPolicy::cluster("skiff-system", &[], &[]).unwrap();
        let refused = CheckedResolver { sinks: Arc::new(cluster) }.call(name.clone()).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            refused.to_string().starts_with("localhost (") && refused.to_string().contains(") is loopback"),
            "{refused}"
        );
        let addrs: Vec<SocketAddr> =
            CheckedResolver { sinks: Arc::new(SinkPolicy::standalone()) }.call(name).await.unwrap().collect();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
