//! What `skiff up` and the operator must agree on about a revision's pods, decided once here:
//! how `skiff-server` and the queue-proxy are started for a predictor (through the argument
//! builders of [`args`]), and when a revision counts as ready.

use skiff_http::logger::sink::SinkPolicy;

use crate::isvc::PredictorSpec;
use crate::settings::RevisionSettings;

pub mod args;

pub use crate::settings::{DEFAULT_TIMEOUT, request_timeout, route_timeout};
pub use args::{AdmissionArgs, BatchingArgs, DrainArgs, LoggerArgs, QueueProxyArgs, ServerArgs, ServerProcess};

/// Header naming the revision: `namespace/name` on requests the router sends to the activator, the
/// revision's name on answers to clients. Written by the router, read by the activator.
pub const REVISION_HEADER: &str = "x-skiff-revision";

/// Header on an answer to a request that met a cold start: the activator held it because its
/// revision had no ready replica when it arrived. Its value is the milliseconds it was held, from
/// its arrival to its slot on the first ready replica. Written by the activator (the one place
/// that holds requests at zero), passed on by the router; `skiff load` attributes cold starts by it.
pub const COLD_START_HEADER: &str = "x-skiff-cold-start";

/// Prefix of the headers the data plane writes on answers itself ([`REVISION_HEADER`],
/// [`COLD_START_HEADER`]): an upstream's own are dropped before they reach a client, so a replica
/// cannot forge them.
pub const OWN_HEADER_PREFIX: &str = "x-skiff-";

/// Whether the header `name` (lower case, as `http` spells names) is one the data plane writes
/// itself, never passed on from a replica.
pub fn is_own_header(name: &str) -> bool {
    name.starts_with(OWN_HEADER_PREFIX)
}

/// `skiff-server`'s arguments for `predictor`, serving the model in `model_dir` as `model_name`
/// on `http_port` (0: a free port, as standalone replicas use): [`ServerArgs::new`] with the
/// predictor's [`admission`] and [`batching`]. Unset fields keep the server's defaults, which are
/// KServe's (batcher 32 rows / 500 ms, unlimited concurrency).
pub fn server_args(model_name: &str, model_dir: &str, http_port: u16, predictor: &PredictorSpec) -> Vec<String> {
    let args = ServerArgs {
        admission: admission(predictor),
        batching: batching(predictor),
        ..ServerArgs::new(model_name, model_dir, http_port)
    };
    args.to_args()
}

/// The predictor as the model server of KServe's collocation sees it: KServe's agent (the request
/// logger and the batcher) fronts the pod's port, which is the transformer container's, so the
/// queue-proxy there logs and batches, and the server the transformer calls does neither.
pub fn behind_transformer(predictor: &PredictorSpec) -> PredictorSpec {
    PredictorSpec { logger: None, batcher: None, ..predictor.clone() }
}

/// The batcher's flags for `predictor.batcher` ([`batching`]), the same for `skiff-server` and
/// the queue-proxy (in front of a custom container); none without one.
pub fn batcher_args(predictor: &PredictorSpec) -> Vec<String> {
    batching(predictor).to_args()
}

/// A revision's `containerConcurrency` as both binaries take it (its [`RevisionSettings`], the one
/// derivation from the spec: 0, unlimited, when unset), with the queue by the one rule
/// ([`AdmissionArgs::max_queued`]). A predictor's spec is read through [`RevisionSettings::of`].
pub fn admission(settings: impl Into<RevisionSettings>) -> AdmissionArgs {
    AdmissionArgs { container_concurrency: settings.into().per_replica_limit(), max_queued: None }
}

/// `predictor.batcher` as both binaries take it: off without one; unset (or out of range) sizes
/// keep the defaults of both, 32 instances and 500 ms.
pub fn batching(predictor: &PredictorSpec) -> BatchingArgs {
    let Some(batcher) = &predictor.batcher else { return BatchingArgs::default() };
    let default = BatchingArgs::default();
    BatchingArgs {
        enable_batching: true,
        max_batch_size: batcher.max_batch_size.and_then(|n| usize::try_from(n).ok()).unwrap_or(default.max_batch_size),
        max_latency_ms: batcher.max_latency.and_then(|ms| u64::try_from(ms).ok()).unwrap_or(default.max_latency_ms),
    }
}

/// Which revision a pod serves, for what it reports about itself (the logger's CloudEvents).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served<'a> {
    /// The InferenceService.
    pub inference_service: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// `predictor`, `transformer` or `explainer`.
    pub component: &'a str,
    /// The revision's name.
    pub revision: &'a str,
}

/// The request logger's flags ([`logger`]) for `predictor.logger`; none without one.
pub fn logger_args(predictor: &PredictorSpec, served: Served<'_>, sinks: &SinkPolicy) -> Vec<String> {
    logger(predictor, served, sinks).to_args()
}

/// The request logger as `skiff-server` and the queue-proxy alike take it, for
/// `predictor.logger`; off (the default) without one. `ce-source` is the component's address in
/// KServe's form, `http://<isvc>-<component>.<namespace>`. `sinks` is the mode's sink rule
/// ([`SinkPolicy::standalone`] in `skiff up`, the cluster's otherwise), which the logger applies
/// again to every address the sink resolves to.
pub fn logger(predictor: &PredictorSpec, served: Served<'_>, sinks: &SinkPolicy) -> LoggerArgs {
    let Some(logger) = &predictor.logger else { return LoggerArgs::default() };
    let Served { inference_service, namespace, component, revision } = served;
    let args = LoggerArgs {
        logger_url: Some(logger.url.clone().unwrap_or_default()),
        logger_mode: logger.mode.clone().unwrap_or_else(|| "all".to_owned()),
        logger_source: format!("http://{inference_service}-{component}.{namespace}"),
        inference_service: inference_service.to_owned(),
        namespace: namespace.to_owned(),
        component: component.to_owned(),
        revision: revision.to_owned(),
        ..LoggerArgs::default()
    };
    args.with_sinks(sinks)
}

/// Where a transformer or explainer reaches its predictor: the router at `router` (an authority,
/// `host:port`), on the path that addresses the predictor alone, past any transformer
/// (`/serving/<namespace>/<isvc>-predictor`). A path, not a host per component, so nothing needs a
/// DNS name of its own; KServe's clients take a `predictor_host` with a path (their base URL is
/// `http://{predictor_host}`). Through the router, a call to a predictor at zero is held by the
/// activator while it scales up, like any other.
pub fn predictor_host(router: &str, namespace: &str, inference_service: &str) -> String {
    format!("{router}/serving/{namespace}/{inference_service}-predictor")
}

/// What KServe gives a transformer's or explainer's container: the arguments
/// `--model_name <isvc> --predictor_host <host>` (appended to its own) and the variable
/// `PREDICTOR_HOST`.
pub fn component_contract(inference_service: &str, predictor_host: &str) -> (Vec<String>, Vec<(String, String)>) {
    let args = ["--model_name", inference_service, "--predictor_host", predictor_host].map(str::to_owned).into();
    (args, vec![("PREDICTOR_HOST".to_owned(), predictor_host.to_owned())])
}

/// Whether a revision counts as ready (and may take traffic): once it has had a ready replica, or
/// at once when it starts with no pod (initial pods 0), because the activator holds its first
/// requests and the autoscaler starts it, as in Knative.
pub fn revision_ready(has_had_ready_replica: bool, initial_pods: u32) -> bool {
    has_had_ready_replica || initial_pods == 0
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::isvc::{Batcher, LoggerSpec};

    #[test]
    fn components_reach_the_predictor_through_the_router_by_path() {
        let host = predictor_host("127.0.0.1:8080", "models", "iris");
        assert_eq!(host, "127.0.0.1:8080/serving/models/iris-predictor");
        let (args, env) = component_contract("iris", &host);
        assert_eq!(args.join(" "), "--model_name iris --predictor_host 127.0.0.1:8080/serving/models/iris-predictor");
        assert_eq!(env, [("PREDICTOR_HOST".to_owned(), host)]);
    }

    #[test]
    fn the_logger_gets_its_sink_mode_and_who_is_logging() {
        let served = Served {
            inference_service: "iris",
            namespace: "models",
            component: "predictor",
            revision: "iris-predictor-00002",
        };
        assert!(logger_args(&PredictorSpec::default(), served, &SinkPolicy::standalone()).is_empty());
        let logged = PredictorSpec {
            logger: Some(LoggerSpec { url: Some("http://sink.models/events".into()), ..LoggerSpec::default() }),
            ..PredictorSpec::default()
        };
        assert_eq!(
            logger_args(&logged, served, &SinkPolicy::standalone()).join(" "),
            "--logger-url http://sink.models/events --logger-mode all --logger-source http://iris-predictor.models \
             --inference-service iris --namespace models --component predictor --revision iris-predictor-00002 \
             --logger-allow-loopback"
        );
        let cluster = SinkPolicy::cluster("skiff-system", &[], &["10.0.0.0/8".to_owned()]).unwrap();
        let args = logger_args(&logged, served, &cluster).join(" ");
        assert!(
            args.ends_with(
                "--logger-protected-hosts *.skiff-system,*.skiff-system.svc,*.skiff-system.svc.cluster.local,\
                 kubernetes.default,kubernetes.default.svc,kubernetes.default.svc.cluster.local \
                 --logger-allowed-hosts 10.0.0.0/8"
            ),
            "{args}"
        );
    }

    #[test]
    fn arguments_carry_only_what_the_predictor_sets() {
        let plain = PredictorSpec::default();
        assert_eq!(
            server_args("iris", "/m", 8080, &plain).join(" "),
            "--model-dir /m --model-name iris --http-port 8080"
        );
        let tuned = PredictorSpec {
            container_concurrency: Some(4),
            batcher: Some(Batcher { max_batch_size: Some(8), max_latency: None }),
            ..PredictorSpec::default()
        };
        assert_eq!(
            server_args("iris", "/m", 0, &tuned).join(" "),
            "--model-dir /m --model-name iris --http-port 0 --container-concurrency 4 --enable-batching --max-batch-size 8"
        );
    }

    #[test]
    fn the_batcher_flags_follow_what_is_set() {
        assert!(batcher_args(&PredictorSpec::default()).is_empty());
        let with = |max_batch_size, max_latency| {
            let batcher = Some(Batcher { max_batch_size, max_latency });
            batcher_args(&PredictorSpec { batcher, ..PredictorSpec::default() }).join(" ")
        };
        assert_eq!(with(None, None), "--enable-batching");
        assert_eq!(with(Some(16), Some(20)), "--enable-batching --max-batch-size 16 --max-latency-ms 20");
    }

    #[test]
    fn the_timeout_stays_within_the_validated_range() {
        let with = |timeout| request_timeout(&PredictorSpec { timeout, ..PredictorSpec::default() });
        assert_eq!(with(None), DEFAULT_TIMEOUT);
        assert_eq!(with(Some(30)), Duration::from_secs(30));
        assert_eq!(with(Some(0)), Duration::from_secs(1));
        assert_eq!(with(Some(i64::MAX)), Duration::from_secs(3600));
    }

    #[test]
    fn a_revision_is_ready_with_a_replica_or_when_it_starts_at_zero() {
        assert!(revision_ready(true, 1));
        assert!(revision_ready(false, 0));
        assert!(!revision_ready(false, 1));
    }
}
