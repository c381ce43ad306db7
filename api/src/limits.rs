//! The bounds and names every rule of the crate shares: a leaf module (it imports no other), so
//! that the types ([`crate::isvc`]), the CRD's schema ([`crate::schema`]), validation
//! ([`crate::validate`]) and the revision rules ([`crate::revision`]) take the same numbers without
//! importing each other. `validate` and `revision` re-export them under their old paths.

/// The most replicas `minReplicas` and `maxReplicas` may name: far beyond one model on one
/// cluster, and small enough that no replica arithmetic (`i32` in a Deployment) can overflow.
pub const MAX_REPLICAS: i64 = 1000;
/// The most requests one replica may take at once: Knative's `container-concurrency-max-limit`.
pub const MAX_CONTAINER_CONCURRENCY: i64 = 1000;
/// The longest request timeout, in seconds: one hour. Knative caps revisions at 600 s by default
/// (`max-revision-timeout-seconds`) and lets an admin raise it; an hour leaves room for long
/// generations, and anything longer is a request nothing should hold a connection open for.
pub const MAX_TIMEOUT_SECS: i64 = 3600;
/// The highest autoscaling target per replica (concurrency, or requests per second with
/// `scaleMetric: rps`). One skiff-server replica answered ~50k requests/s on 2 cores
/// (docs/benchmarks.md), so 100k leaves room for rps on bigger machines; above, a target only
/// means that the revision never scales out.
pub const MAX_SCALE_TARGET: i64 = 100_000;

/// The container KServe's collocation runs beside the model server, in the model's pod: it takes
/// the traffic and calls the model server on localhost (KServe's `TransformerContainerName`).
pub const TRANSFORMER_CONTAINER: &str = "transformer-container";
/// The port a collocated model server listens on, where KServe's collocation samples have the
/// transformer call it (`--predictor_host=localhost:8085`): Skiff starts `skiff-server` there, and
/// a runtime's container that declares no port gets it as `PORT`.
pub const COLLOCATED_MODEL_PORT: u16 = 8085;

/// KServe's predictor shorthands for a framework, each an alternative to `model` and `containers`.
pub const FRAMEWORKS: [&str; 10] =
    ["sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "pmml", "lightgbm", "paddle", "huggingface"];

/// The most characters of a Kubernetes name or label value that must be a DNS label (RFC 1035).
pub const DNS_LABEL_MAX: usize = 63;
/// Digits of a revision number: five, as Knative writes them.
const REVISION_DIGITS: usize = 5;
/// The highest revision number, the most that five digits hold. Past it the next
/// name would grow, so Skiff refuses a new revision instead (see [`crate::revision::next_number`]).
pub const MAX_REVISION: u32 = 99_999;
/// The longest InferenceService name. Of the names and label values Skiff derives from it, the
/// longest is a revision's, `<name>-predictor-NNNNN` (the name of its Deployment and Service and
/// the value of its `skiff.dev/revision-name` label), 16 characters more than the name; the others
/// are shorter (the predictor host `<name>-predictor`, the tag hosts `latest-<name>` and
/// `prev-<name>`, the `serving.kserve.io/inferenceservice` label). So the name has at most
/// 63 - 16 = 47 characters.
pub const MAX_NAME_LENGTH: usize = DNS_LABEL_MAX - (1 + "predictor".len() + 1 + REVISION_DIGITS);

/// The limit on an InferenceService's name and why, as both this check and the CRD's rule say it.
pub fn name_limit() -> String {
    format!(
        "the limit is {MAX_NAME_LENGTH} characters, so that revision names (<name>-predictor-00001) fit \
         in {DNS_LABEL_MAX}"
    )
}

/// What a DNS-1035 label is, as both this check and the CRD's rule say it.
pub const DNS_1035: &str =
    "lowercase letters, digits and '-', starting with a letter and ending with a letter or digit";
