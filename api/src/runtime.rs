//! KServe's serving runtimes (`serving.kserve.io/v1alpha1`): the namespaced [`ServingRuntime`] and
//! the cluster-wide [`ClusterServingRuntime`], which say which container serves which model formats,
//! and the rule that picks one for an InferenceService's `spec.predictor.model` ([`select_runtime`]).
//!
//! Skiff serves ONNX models on its embedded server (`skiff-server`) unless the InferenceService
//! names a runtime ([`uses_embedded_server`]); every other format runs the container of the runtime
//! chosen here, as KServe chooses it:
//!
//! - **`runtime:` named**: the ServingRuntime of that name in the InferenceService's namespace, else
//!   the ClusterServingRuntime of that name. It must exist, must not be disabled, must support the
//!   model's `protocolVersion` when the model gives one, and must list the model's format (and
//!   version, when the model gives one) in `supportedModelFormats`, `autoSelect` or not.
//! - **auto-selection**: candidates are the runtimes that are not disabled, not `multiModel`
//!   (ModelMesh), list the model's format with `autoSelect: true` (and the same version, when the
//!   model gives one), and support the model's protocol (`v1` when the model names none; a runtime
//!   that lists no `protocolVersions` supports every protocol). The namespace's candidates come
//!   first, then the cluster's; each group is ordered by the format's `priority` (a runtime that
//!   gives one before a runtime that does not, higher first), and, between equal priorities, by
//!   the lowest protocol the runtime lists (`v1`, `v2`, `grpc-v1`, `grpc-v2`, none last), the newest
//!   first, then by name. The first candidate wins.
//!
//! Format names are compared without regard to case (`SKLearn` is `sklearn`); versions exactly.
//! The CRDs are generated from these types ([`servingruntimes_crd`], [`clusterservingruntimes_crd`];
//! `crdgen servingruntimes` and `crdgen clusterservingruntimes` print them). Fields Skiff does not
//! read are kept in `other`, so KServe's own runtimes (and ModelMesh's) parse unchanged.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Volume};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::isvc::{ModelFormat, ModelSpec};

/// The API group and version of both kinds.
pub const API_VERSION: &str = "serving.kserve.io/v1alpha1";
/// The model format Skiff serves on its embedded server.
pub const EMBEDDED_FORMAT: &str = "onnx";
/// The protocol of a model that names none (KServe's `GetProtocol`).
pub const DEFAULT_PROTOCOL: &str = "v1";
/// Where the ServingRuntime CRD is checked in, relative to the repository root.
pub const SERVINGRUNTIMES_CRD_PATH: &str = "deploy/crds/serving.kserve.io_servingruntimes.yaml";
/// Where the ClusterServingRuntime CRD is checked in, relative to the repository root.
pub const CLUSTERSERVINGRUNTIMES_CRD_PATH: &str = "deploy/crds/serving.kserve.io_clusterservingruntimes.yaml";

/// `spec` of a [`ServingRuntime`] (and, flattened, of a [`ClusterServingRuntime`]): KServe's
/// `ServingRuntimeSpec`, the fields Skiff's selection and pod building read, and the rest kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, CustomResource, JsonSchema)]
#[kube(
    group = "serving.kserve.io",
    version = "v1alpha1",
    kind = "ServingRuntime",
    namespaced,
    derive = "PartialEq",
    derive = "Default",
    doc = "A model server container and the model formats it serves (KServe ServingRuntime), for the \
           InferenceServices of its namespace.",
    printcolumn = r#"{"name": "Disabled", "type": "boolean", "jsonPath": ".spec.disabled"}"#,
    printcolumn = r#"{"name": "ModelType", "type": "string", "jsonPath": ".spec.supportedModelFormats[*].name"}"#,
    printcolumn = r#"{"name": "Containers", "type": "string", "jsonPath": ".spec.containers[*].name"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = spec_schema, description = "The runtime: the model formats it serves, its protocols and its containers.")]
pub struct ServingRuntimeSpec {
    /// The model formats (and versions) this runtime serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_model_formats: Vec<SupportedModelFormat>,
    /// Whether this is a multi-model (ModelMesh) runtime; those are never auto-selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_model: Option<bool>,
    /// `true` takes the runtime out of use: neither auto-selected nor usable by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
    /// The protocols the server speaks (`v1`, `v2`, `grpc-v1`, `grpc-v2`); none listed = any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocol_versions: Vec<String>,
    /// The pod's containers; the first (or the one named `kserve-container`) serves the model.
    /// Its args may use KServe's placeholders, e.g. `--model_name={{.Name}}`.
    #[serde(default)]
    #[schemars(schema_with = "containers_schema")]
    pub containers: Vec<Container>,
    /// Volumes the containers mount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::any_object_list")]
    pub volumes: Vec<Volume>,
    /// Labels added to the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations added to the pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Everything else (`nodeSelector`, `affinity`, `tolerations`, `imagePullSecrets`, `hostIPC`,
    /// `workerSpec`, `storageHelper`, ModelMesh's endpoints and adapter, ...), kept as written.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `spec` of a [`ClusterServingRuntime`]: the same fields as a ServingRuntime's
/// ([`ServingRuntimeSpec`], flattened; `Deref` reaches them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, CustomResource, JsonSchema)]
#[kube(
    group = "serving.kserve.io",
    version = "v1alpha1",
    kind = "ClusterServingRuntime",
    derive = "PartialEq",
    derive = "Default",
    doc = "A model server container and the model formats it serves (KServe ClusterServingRuntime), for \
           the InferenceServices of every namespace.",
    printcolumn = r#"{"name": "Disabled", "type": "boolean", "jsonPath": ".spec.disabled"}"#,
    printcolumn = r#"{"name": "ModelType", "type": "string", "jsonPath": ".spec.supportedModelFormats[*].name"}"#,
    printcolumn = r#"{"name": "Containers", "type": "string", "jsonPath": ".spec.containers[*].name"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[schemars(transform = spec_schema, description = "The runtime: the model formats it serves, its protocols and its containers.")]
pub struct ClusterServingRuntimeSpec {
    /// The runtime's fields.
    #[serde(flatten)]
    pub spec: ServingRuntimeSpec,
}

impl std::ops::Deref for ClusterServingRuntimeSpec {
    type Target = ServingRuntimeSpec;
    fn deref(&self) -> &ServingRuntimeSpec {
        &self.spec
    }
}

impl From<ServingRuntimeSpec> for ClusterServingRuntimeSpec {
    fn from(spec: ServingRuntimeSpec) -> Self {
        ClusterServingRuntimeSpec { spec }
    }
}

/// `spec.supportedModelFormats[]`: a format the runtime serves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::preserve_unknown_fields)]
pub struct SupportedModelFormat {
    /// The format's name, e.g. `sklearn` (compared without regard to case).
    #[schemars(length(min = 1))]
    pub name: String,
    /// The format's version (`major`, `major.minor` or `major.minor.patch`); a model that gives a
    /// version needs the same one here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `true`: the runtime may be chosen for a model of this format that names no runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_select: Option<bool>,
    /// Among auto-selected runtimes of the same scope, the higher wins; one that gives a priority
    /// wins over one that does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub priority: Option<i32>,
    /// Everything else, kept as written.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// Which of the two kinds a runtime is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeKind {
    /// A `ServingRuntime` in the InferenceService's namespace.
    Namespaced,
    /// A `ClusterServingRuntime`.
    Cluster,
}

impl RuntimeKind {
    /// The Kubernetes kind.
    pub fn kind(self) -> &'static str {
        match self {
            RuntimeKind::Namespaced => "ServingRuntime",
            RuntimeKind::Cluster => "ClusterServingRuntime",
        }
    }
}

impl fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

impl fmt::Display for ModelFormat {
    /// `sklearn`, or `sklearn version 1.5` when the version is given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.version {
            Some(version) => write!(f, "{} version {version}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The runtime chosen for a model ([`select_runtime`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelectedRuntime<'a> {
    /// The runtime's name (what KServe writes back into `spec.predictor.model.runtime`).
    pub name: &'a str,
    /// Whether it is a ServingRuntime or a ClusterServingRuntime.
    pub kind: RuntimeKind,
    /// Its spec: the containers to run.
    pub spec: &'a ServingRuntimeSpec,
}

impl SelectedRuntime<'_> {
    /// Whether the runtime is a ClusterServingRuntime.
    pub fn is_cluster(&self) -> bool {
        self.kind == RuntimeKind::Cluster
    }
}

impl SupportedModelFormat {
    /// Whether this entry serves `format`: the same name (any case) and, when `format` gives a
    /// version, the same version.
    pub fn matches(&self, format: &ModelFormat) -> bool {
        self.name.eq_ignore_ascii_case(&format.name)
            && format.version.as_ref().is_none_or(|v| self.version.as_ref() == Some(v))
    }

    /// Whether `autoSelect` is `true`.
    pub fn is_auto_select(&self) -> bool {
        self.auto_select == Some(true)
    }
}

impl ServingRuntimeSpec {
    /// Whether `disabled` is `true`.
    pub fn is_disabled(&self) -> bool {
        self.disabled == Some(true)
    }

    /// Whether `multiModel` is `true` (a ModelMesh runtime).
    pub fn is_multi_model(&self) -> bool {
        self.multi_model == Some(true)
    }

    /// Whether the runtime speaks `protocol`; a runtime that lists no protocols speaks any (KServe's
    /// `IsProtocolVersionSupported`).
    pub fn supports_protocol(&self, protocol: &str) -> bool {
        self.protocol_versions.is_empty() || self.protocol_versions.iter().any(|p| p == protocol)
    }

    /// Whether an entry of `supportedModelFormats` serves `format`; with `auto_select_only`, only
    /// entries with `autoSelect: true` count.
    pub fn supports_format(&self, format: &ModelFormat, auto_select_only: bool) -> bool {
        self.supported_model_formats.iter().any(|f| f.matches(format) && (!auto_select_only || f.is_auto_select()))
    }

    /// The `priority` of the first `supportedModelFormats` entry named `format_name` (any case).
    pub fn priority(&self, format_name: &str) -> Option<i32> {
        self.supported_model_formats.iter().find(|f| f.name.eq_ignore_ascii_case(format_name))?.priority
    }

    /// The rank of the lowest protocol the runtime lists (`v1` 0, `v2` 1, `grpc-v1` 2, `grpc-v2` 3,
    /// anything else and none 4): KServe orders runtimes by it before their age.
    pub fn protocol_rank(&self) -> u8 {
        self.protocol_versions.iter().map(|p| protocol_rank(p)).min().unwrap_or(UNKNOWN_PROTOCOL)
    }
}

const UNKNOWN_PROTOCOL: u8 = 4;

fn protocol_rank(protocol: &str) -> u8 {
    match protocol {
        "v1" => 0,
        "v2" => 1,
        "grpc-v1" => 2,
        "grpc-v2" => 3,
        _ => UNKNOWN_PROTOCOL,
    }
}

/// Whether `model` runs on Skiff's embedded server (`skiff-server`) rather than a runtime's
/// container: an ONNX model (any case) that names no `runtime:`.
pub fn uses_embedded_server(model: &ModelSpec) -> bool {
    model.model_format.name.eq_ignore_ascii_case(EMBEDDED_FORMAT) && model.runtime.is_none()
}

/// The protocol `model` asks for: its `protocolVersion`, `v1` when it gives none.
pub fn model_protocol(model: &ModelSpec) -> &str {
    model.protocol_version.as_deref().unwrap_or(DEFAULT_PROTOCOL)
}

/// Chooses the runtime for `model` from the ServingRuntimes of the InferenceService's namespace
/// (`namespaced`) and the ClusterServingRuntimes (`cluster`), by KServe's rules (see the module
/// documentation). The slices may come in any order.
///
/// Errors (each names what is wrong; [`Error::runtime_reason`] gives KServe's reason for the
/// status): [`Error::RuntimeNotFound`], [`Error::RuntimeDisabled`],
/// [`Error::RuntimeProtocolUnsupported`] and [`Error::RuntimeFormatUnsupported`] for a named
/// runtime; [`Error::NoSupportingRuntime`] when none is named and none qualifies.
pub fn select_runtime<'a>(
    model: &ModelSpec,
    namespaced: &'a [ServingRuntime],
    cluster: &'a [ClusterServingRuntime],
) -> Result<SelectedRuntime<'a>> {
    let Some(name) = model.runtime.as_deref() else {
        return supporting_runtimes(model, namespaced, cluster).into_iter().next().ok_or_else(|| {
            Error::NoSupportingRuntime {
                format: model.model_format.to_string(),
                protocol: model_protocol(model).to_owned(),
            }
        });
    };
    let found = entries(namespaced, cluster).find(|r| r.name == name);
    let runtime = found.ok_or_else(|| Error::RuntimeNotFound { name: name.to_owned() })?;
    let (name, kind, spec) = (runtime.name.to_owned(), runtime.kind.kind(), runtime.spec);
    if spec.is_disabled() {
        return Err(Error::RuntimeDisabled { name, kind });
    }
    if let Some(protocol) = model.protocol_version.as_deref()
        && !spec.supports_protocol(protocol)
    {
        let supported = spec.protocol_versions.clone();
        return Err(Error::RuntimeProtocolUnsupported { name, kind, protocol: protocol.to_owned(), supported });
    }
    if !spec.supports_format(&model.model_format, false) {
        return Err(Error::RuntimeFormatUnsupported { name, kind, format: model.model_format.to_string() });
    }
    Ok(runtime.selected())
}

/// Every runtime KServe's auto-selection could choose for `model`, best first (KServe's
/// `GetSupportingRuntimes` for single-model serving): the namespace's candidates, then the
/// cluster's, each ordered as the module documentation says. `model.runtime` is not consulted.
pub fn supporting_runtimes<'a>(
    model: &ModelSpec,
    namespaced: &'a [ServingRuntime],
    cluster: &'a [ClusterServingRuntime],
) -> Vec<SelectedRuntime<'a>> {
    let protocol = model_protocol(model);
    let qualifies = |r: &Entry<'_>| {
        let spec = r.spec;
        !spec.is_disabled()
            && !spec.is_multi_model()
            && spec.supports_format(&model.model_format, true)
            && spec.supports_protocol(protocol)
    };
    let mut candidates: Vec<Entry<'a>> = entries(namespaced, cluster).filter(qualifies).collect();
    let format = &model.model_format.name;
    candidates.sort_by(|a, b| {
        scope_rank(a.kind)
            .cmp(&scope_rank(b.kind))
            .then_with(|| by_priority(a.spec.priority(format), b.spec.priority(format)))
            .then_with(|| a.spec.protocol_rank().cmp(&b.spec.protocol_rank()))
            .then_with(|| b.created.cmp(&a.created))
            .then_with(|| a.name.cmp(b.name))
    });
    candidates.iter().map(Entry::selected).collect()
}

/// A runtime of either kind, with what the ordering needs.
struct Entry<'a> {
    name: &'a str,
    kind: RuntimeKind,
    spec: &'a ServingRuntimeSpec,
    created: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

impl<'a> Entry<'a> {
    fn selected(&self) -> SelectedRuntime<'a> {
        SelectedRuntime { name: self.name, kind: self.kind, spec: self.spec }
    }
}

/// The namespace's runtimes, then the cluster's.
fn entries<'a>(
    namespaced: &'a [ServingRuntime],
    cluster: &'a [ClusterServingRuntime],
) -> impl Iterator<Item = Entry<'a>> {
    let ns = namespaced.iter().map(|r| Entry {
        name: r.metadata.name.as_deref().unwrap_or_default(),
        kind: RuntimeKind::Namespaced,
        spec: &r.spec,
        created: r.metadata.creation_timestamp.as_ref(),
    });
    let cl = cluster.iter().map(|r| Entry {
        name: r.metadata.name.as_deref().unwrap_or_default(),
        kind: RuntimeKind::Cluster,
        spec: &r.spec.spec,
        created: r.metadata.creation_timestamp.as_ref(),
    });
    ns.chain(cl)
}

fn scope_rank(kind: RuntimeKind) -> u8 {
    match kind {
        RuntimeKind::Namespaced => 0,
        RuntimeKind::Cluster => 1,
    }
}

/// A priority before none; the higher first.
fn by_priority(a: Option<i32>, b: Option<i32>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => b.cmp(&a),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// The spec's schema: unknown fields kept (KServe's runtimes carry many), `containers` required
/// (without the empty default that `#[serde(default)]` puts there).
fn spec_schema(schema: &mut Schema) {
    crate::schema::preserve_unknown_fields(schema);
    schema.insert("required".into(), serde_json::json!(["containers"]));
    if let Some(Value::Object(containers)) = schema.get_mut("properties").and_then(|p| p.get_mut("containers")) {
        containers.remove("default");
    }
}

/// `containers`: a non-empty list of Kubernetes containers, each with a name; their other fields
/// are kept as written (the API server checks them when the operator creates the pod).
fn containers_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "minItems": 1,
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "image": {"type": "string"},
            },
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// The CustomResourceDefinition of `servingruntimes.serving.kserve.io`.
pub fn servingruntimes_crd() -> CustomResourceDefinition {
    ServingRuntime::crd()
}

/// The CustomResourceDefinition of `clusterservingruntimes.serving.kserve.io`.
pub fn clusterservingruntimes_crd() -> CustomResourceDefinition {
    ClusterServingRuntime::crd()
}

/// A runtime CRD as the YAML document checked in at `path`.
pub fn crd_yaml(crd: &CustomResourceDefinition, path: &str) -> Result<String> {
    let body = serde_saphyr::to_string(crd).map_err(|e| Error::Yaml(e.to_string()))?;
    let kind = &crd.spec.names.plural;
    Ok(format!(
        "# Generated from the Rust types in api/src/runtime.rs: do not edit.\n\
         # Regenerate with: cargo run -q -p skiff-api --bin crdgen {kind} > {path}\n{body}"
    ))
}

/// Parses one ServingRuntime manifest (YAML).
pub fn serving_runtime_from_yaml(text: &str) -> Result<ServingRuntime> {
    serde_saphyr::from_str(text).map_err(|e| Error::ParseManifest { kind: "ServingRuntime", message: e.to_string() })
}

/// Parses one ClusterServingRuntime manifest (YAML).
pub fn cluster_serving_runtime_from_yaml(text: &str) -> Result<ClusterServingRuntime> {
    serde_saphyr::from_str(text)
        .map_err(|e| Error::ParseManifest { kind: "ClusterServingRuntime", message: e.to_string() })
}

pub mod container;
pub mod defaults;

#[cfg(test)]
mod tests;
