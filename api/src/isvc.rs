//! KServe `serving.kserve.io/v1beta1` InferenceService: the subset Skiff acts on, with every other
//! field kept (in `other`) so nothing a user wrote is dropped.
//!
//! These types are also the source of the CustomResourceDefinition: [`InferenceServiceSpec`] derives
//! `CustomResource`, which generates [`InferenceServiceResource`] (the object the API server stores,
//! with Kubernetes metadata and [`crate::status::InferenceServiceStatus`]); [`crate::schema`] adds the
//! parts of the schema that cannot be derived, among them KServe's other fields by name
//! ([`crate::fields`]): `other` keeps those, and a field KServe does not have is unknown. [`InferenceService`] is the manifest form that
//! standalone mode reads from files; [`crate::resource`] converts between the two.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The API group and version Skiff serves.
pub const API_VERSION: &str = "serving.kserve.io/v1beta1";
/// The kind.
pub const KIND: &str = "InferenceService";

/// An InferenceService manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InferenceService {
    /// Must be [`API_VERSION`].
    pub api_version: String,
    /// Must be [`KIND`].
    pub kind: String,
    /// Name, namespace, labels, annotations.
    pub metadata: ObjectMeta,
    /// The desired state.
    pub spec: InferenceServiceSpec,
}

/// The parts of Kubernetes object metadata a manifest carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Object name (a DNS-1035 label).
    pub name: String,
    /// Namespace; `default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations, including `autoscaling.knative.dev/*`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Everything else.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, CustomResource, JsonSchema)]
#[kube(
    group = "serving.kserve.io",
    version = "v1beta1",
    kind = "InferenceService",
    root = "InferenceServiceResource",
    namespaced,
    shortname = "isvc",
    status = "crate::status::InferenceServiceStatus",
    derive = "PartialEq",
    doc = "A model served over HTTP (KServe InferenceService v1beta1), scaled with its traffic, down to zero.",
    printcolumn = r#"{"name": "URL", "type": "string", "jsonPath": ".status.url"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Prev", "type": "integer",
                     "jsonPath": ".status.components.predictor.traffic[?(@.tag==\"prev\")].percent"}"#,
    printcolumn = r#"{"name": "Latest", "type": "integer",
                     "jsonPath": ".status.components.predictor.traffic[?(@.latestRevision==true)].percent"}"#,
    printcolumn = r#"{"name": "PrevRolledoutRevision", "type": "string", "priority": 1,
                     "jsonPath": ".status.components.predictor.previousRolledoutRevision"}"#,
    printcolumn = r#"{"name": "LatestReadyRevision", "type": "string", "priority": 1,
                     "jsonPath": ".status.components.predictor.latestReadyRevision"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InferenceServiceSpec {
    /// The model server component.
    pub predictor: PredictorSpec,
    /// Pre/post-processing before the predictor: a custom container (`containers`) with the same
    /// component fields as the predictor (replicas, scaling, concurrency, timeout, canary, logger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformer: Option<PredictorSpec>,
    /// Explanations (`:explain`): a custom container, with the same component fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explainer: Option<PredictorSpec>,
    /// Everything else.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// PodSpec fields KServe accepts inline in a component (`spec.predictor`, ...): a cluster passes
/// them to the pod as written; `skiff up`, which runs a local process, reports them as unused.
pub const POD_FIELDS: [&str; 21] = [
    "serviceAccountName",
    "serviceAccount",
    "nodeSelector",
    "nodeName",
    "tolerations",
    "affinity",
    "imagePullSecrets",
    "priorityClassName",
    "schedulerName",
    "securityContext",
    "runtimeClassName",
    "hostAliases",
    "dnsPolicy",
    "dnsConfig",
    "terminationGracePeriodSeconds",
    "topologySpreadConstraints",
    "volumes",
    "initContainers",
    "automountServiceAccountToken",
    "enableServiceLinks",
    "resources",
];

/// The fields of KServe's `ComponentExtensionSpec` that shape a component's Deployment rather than
/// its pod: the pods' labels and annotations and the rollout strategy (cluster-only, like
/// [`POD_FIELDS`]).
pub const DEPLOYMENT_FIELDS: [&str; 3] = ["labels", "annotations", "deploymentStrategy"];

/// `spec.predictor`. Numbers are signed so that a negative value is reported by field name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::predictor)]
pub struct PredictorSpec {
    /// The model to serve with a runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSpec>,
    /// A custom container instead of a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_object_list")]
    pub containers: Option<Vec<Value>>,
    /// Fewest replicas; KServe's default is 1, and 0 allows scale to zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = crate::limits::MAX_REPLICAS))]
    pub min_replicas: Option<i64>,
    /// Most replicas; 0 = no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = crate::limits::MAX_REPLICAS))]
    pub max_replicas: Option<i64>,
    /// Autoscaling target per replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = crate::limits::MAX_SCALE_TARGET))]
    pub scale_target: Option<i64>,
    /// `concurrency`, `rps`, `cpu` or `memory` (the last two: KServe's HPA metrics; the CRD admits
    /// what KServe's does, and validation says which classes read which metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["concurrency", "rps", "cpu", "memory"]))]
    pub scale_metric: Option<String>,
    /// Requests one replica handles at once; 0 = unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = crate::limits::MAX_CONTAINER_CONCURRENCY))]
    pub container_concurrency: Option<i64>,
    /// Request timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = crate::limits::MAX_TIMEOUT_SECS))]
    pub timeout: Option<i64>,
    /// Percent of traffic for the latest revision while the previous one keeps the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub canary_traffic_percent: Option<i64>,
    /// Dynamic batching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batcher: Option<Batcher>,
    /// Each request and/or response sent as a CloudEvent to a sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<LoggerSpec>,
    /// Everything else (framework shorthands such as `sklearn:`, `serviceAccountName`, ...).
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `spec.predictor.model`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelSpec {
    /// The model's format, e.g. `onnx`. Optional, as in KServe: a model that names its `runtime`
    /// may omit it (absent, it reads as an empty name; validation asks for one or the other).
    #[serde(default, skip_serializing_if = "ModelFormat::is_unset")]
    pub model_format: ModelFormat,
    /// Where the model lives: `file://`, `pvc://`, `gs://`, ... Optional, as in KServe (a Hugging
    /// Face model may name its model by `args`); the embedded server needs it (validation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_uri: Option<String>,
    /// Serving runtime name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// `v1`, `v2` or `grpc-v2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["v1", "v2", "grpc-v2"]))]
    pub protocol_version: Option<String>,
    /// Everything else.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `spec.predictor.model.modelFormat`; the default (an empty name) stands for an absent one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelFormat {
    /// Format name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Format version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `spec.predictor.batcher`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Batcher {
    /// Rows per batch (KServe default 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_batch_size: Option<i64>,
    /// Milliseconds a batch waits to fill (KServe default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_latency: Option<i64>,
}

/// `spec.predictor.logger` (KServe's `LoggerSpec`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoggerSpec {
    /// The sink: an `http://` URL that takes CloudEvents in binary mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `all` (default), `request` or `response`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["all", "request", "response"]))]
    pub mode: Option<String>,
    /// Everything else (`metadataHeaders`, `storage`, ...), kept as written and not used.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// A manifest that cannot be read as an InferenceService ([`InferenceService::read_yaml`]).
#[derive(Debug)]
pub struct YamlError {
    /// The field being read, or missing, as a manifest path (`spec.predictor.model.modelFormat`);
    /// empty where the document itself is wrong (not a mapping, not YAML).
    pub path: String,
    /// What the YAML reader said.
    pub error: Box<serde_saphyr::Error>,
}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path.as_str() {
            "" => write!(f, "{}", self.error),
            path => write!(f, "{path}: {}", self.error),
        }
    }
}

/// `serde_path_to_error`'s path as a field path: `.` (the root) is empty, `?` parts (read through
/// a flattened map, where the path is lost) end it; a missing field is named after it (except
/// `apiVersion` and `kind`).
fn field_path(path: &str, error: &serde_saphyr::Error) -> String {
    let all: Vec<&str> = path.split('.').filter(|part| !part.is_empty()).collect();
    let mut parts: Vec<&str> = all.iter().copied().take_while(|part| *part != "?").collect();
    let lost = parts.len() < all.len();
    let mut inner = error;
    while let serde_saphyr::Error::WithSnippet { error, .. } | serde_saphyr::Error::AliasError { error, .. } = inner {
        inner = error;
    }
    // A document without apiVersion or kind is no manifest at all: there is no field to name.
    if let serde_saphyr::Error::SerdeMissingField { field, .. } = inner
        && !lost
        && !(parts.is_empty() && ["apiVersion", "kind"].contains(field))
    {
        parts.push(field);
    }
    parts.join(".")
}

impl ModelFormat {
    /// Whether the manifest gave no format (the default, which is never written back).
    pub fn is_unset(&self) -> bool {
        self.name.is_empty() && self.version.is_none()
    }
}

impl InferenceService {
    /// Parses one YAML manifest; the error names the field where it can.
    pub fn from_yaml(text: &str) -> crate::Result<InferenceService> {
        InferenceService::read_yaml(text).map_err(|e| crate::Error::Parse(e.to_string()))
    }

    /// Parses one YAML manifest, keeping the parser's error as it is (its message may quote the
    /// text: callers that must not show the text build their own from [`YamlError::error`]) with the
    /// path of the field it was reading.
    pub fn read_yaml(text: &str) -> Result<InferenceService, YamlError> {
        let mut path = None;
        serde_saphyr::with_deserializer_from_str(text, |de| {
            serde_path_to_error::deserialize(de).map_err(|e| {
                path = Some(e.path().to_string());
                e.into_inner()
            })
        })
        .map_err(|error| YamlError { path: field_path(path.as_deref().unwrap_or("."), &error), error: Box::new(error) })
    }

    /// The namespace, `default` when unset.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
}
