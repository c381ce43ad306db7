//! KServe's InferenceService fields by name, level by level: the one rule that tells a field KServe
//! has (acted on by Skiff or not) from an unknown one, such as a misspelt `minReplica`.
//!
//! The names are those KServe's own CRD declares at each [`Level`] (kserve/kserve's
//! `config/crd/full`; the resource tests compare them with the copy in
//! `tests/fixtures/kserve-corpus`). Two places use them:
//! - `skiff up` reports every field [`unknown_fields`] finds as `kubectl` does (`unknown field
//!   "spec.predictor.minReplica"`), and refuses it under `--strict`;
//! - the CRD declares exactly these names at these levels, without preserving unknown fields
//!   ([`crate::schema::known_fields`]), so that on a cluster `kubectl apply` warns about the same
//!   fields and `--validate=strict` refuses them.
//!
//! Below these levels (a pod's `affinity`, a container's `resources`, ...) values are kept as
//! written and not checked here: they are Kubernetes' own types, which Skiff passes on.

use serde_json::Value;

use crate::limits::FRAMEWORKS;

/// A manifest's top-level fields.
const ROOT: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];
/// Kubernetes `ObjectMeta`'s fields.
const METADATA: [&str; 15] = [
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
];
/// `spec`'s fields.
const SPEC: [&str; 4] = ["canary", "explainer", "predictor", "transformer"];
/// The fields every component has: KServe's `ComponentExtensionSpec` and the `PodSpec` inlined in it.
const COMPONENT: [&str; 55] = [
    "activeDeadlineSeconds",
    "affinity",
    "annotations",
    "autoScaling",
    "automountServiceAccountToken",
    "batcher",
    "canaryTrafficPercent",
    "containerConcurrency",
    "containers",
    "deploymentStrategy",
    "dnsConfig",
    "dnsPolicy",
    "enableServiceLinks",
    "hostAliases",
    "hostIPC",
    "hostNetwork",
    "hostPID",
    "hostUsers",
    "hostname",
    "hostnameOverride",
    "imagePullSecrets",
    "initContainers",
    "labels",
    "logger",
    "maxReplicas",
    "minReplicas",
    "nodeName",
    "nodeSelector",
    "os",
    "overhead",
    "preemptionPolicy",
    "priority",
    "priorityClassName",
    "readinessGates",
    "resourceClaims",
    "resources",
    "restartPolicy",
    "runtimeClassName",
    "scaleMetric",
    "scaleMetricType",
    "scaleTarget",
    "schedulerName",
    "schedulingGates",
    "securityContext",
    "serviceAccount",
    "serviceAccountName",
    "setHostnameAsFQDN",
    "shareProcessNamespace",
    "storageUris",
    "subdomain",
    "terminationGracePeriodSeconds",
    "timeout",
    "tolerations",
    "topologySpreadConstraints",
    "volumes",
];
/// The predictor's own fields besides the framework shorthands ([`FRAMEWORKS`]).
const PREDICTOR: [&str; 4] = ["model", "name", "storageContainerName", "workerSpec"];
/// The explainer's own field: KServe's ART explainer.
const EXPLAINER: [&str; 1] = ["art"];
/// Kubernetes `Container`'s fields.
const CONTAINER: [&str; 25] = [
    "args",
    "command",
    "env",
    "envFrom",
    "image",
    "imagePullPolicy",
    "lifecycle",
    "livenessProbe",
    "name",
    "ports",
    "readinessProbe",
    "resizePolicy",
    "resources",
    "restartPolicy",
    "restartPolicyRules",
    "securityContext",
    "startupProbe",
    "stdin",
    "stdinOnce",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "tty",
    "volumeDevices",
    "volumeMounts",
    "workingDir",
];
/// What a framework shorthand (`sklearn:`, ...) adds to a container: KServe's `PredictorExtensionSpec`.
const FRAMEWORK: [&str; 5] = ["confidential", "protocolVersion", "runtimeVersion", "storage", "storageUri"];
/// What `model:` adds to a framework shorthand's fields.
const MODEL: [&str; 2] = ["modelFormat", "runtime"];
/// What the ART explainer adds to a container.
const ART: [&str; 5] = ["config", "runtimeVersion", "storage", "storageUri", "type"];
/// `modelFormat`'s fields.
const MODEL_FORMAT: [&str; 2] = ["name", "version"];
/// `batcher`'s fields.
const BATCHER: [&str; 3] = ["maxBatchSize", "maxLatency", "timeout"];
/// `logger`'s fields.
const LOGGER: [&str; 8] =
    ["batchInterval", "batchSize", "marshallerUrl", "metadataAnnotations", "metadataHeaders", "mode", "storage", "url"];

/// A level of an InferenceService whose field names are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The manifest itself.
    Root,
    /// `metadata`.
    Metadata,
    /// `spec`.
    Spec,
    /// `spec.predictor`, `spec.transformer` or `spec.explainer`: one type in Skiff (as the CRD's
    /// rules need every field to test for), KServe's predictor's and explainer's fields together;
    /// validation refuses a transformer's `model`, naming it.
    Component,
    /// `spec.predictor.model`.
    Model,
    /// A framework shorthand, `spec.predictor.sklearn`, ...
    Framework,
    /// `spec.explainer.art`.
    Art,
    /// An item of `containers` or `initContainers`.
    Container,
    /// `spec.predictor.model.modelFormat`.
    ModelFormat,
    /// A component's `batcher`.
    Batcher,
    /// A component's `logger`.
    Logger,
}

/// How a field's value is checked: at a level, or each item of a list at a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// An object at this level.
    Object(Level),
    /// A list of objects at this level.
    List(Level),
}

impl Level {
    /// Every level.
    pub const ALL: [Level; 11] = [
        Level::Root,
        Level::Metadata,
        Level::Spec,
        Level::Component,
        Level::Model,
        Level::Framework,
        Level::Art,
        Level::Container,
        Level::ModelFormat,
        Level::Batcher,
        Level::Logger,
    ];

    /// Every field name KServe declares at this level.
    pub fn fields(self) -> Vec<&'static str> {
        let all: &[&[&'static str]] = match self {
            Level::Root => &[&ROOT],
            Level::Metadata => &[&METADATA],
            Level::Spec => &[&SPEC],
            Level::Component => &[&COMPONENT, &PREDICTOR, &FRAMEWORKS, &EXPLAINER],
            Level::Model => &[&CONTAINER, &FRAMEWORK, &MODEL],
            Level::Framework => &[&CONTAINER, &FRAMEWORK],
            Level::Art => &[&CONTAINER, &ART],
            Level::Container => &[&CONTAINER],
            Level::ModelFormat => &[&MODEL_FORMAT],
            Level::Batcher => &[&BATCHER],
            Level::Logger => &[&LOGGER],
        };
        let mut fields: Vec<&'static str> = all.iter().flat_map(|names| names.iter().copied()).collect();
        fields.sort_unstable();
        fields
    }

    /// Where `field`'s value is checked in turn; `None` where its fields are not (a free-form value
    /// or a Kubernetes type).
    pub fn child(self, field: &str) -> Option<Child> {
        match (self, field) {
            (Level::Root, "metadata") => Some(Child::Object(Level::Metadata)),
            (Level::Root, "spec") => Some(Child::Object(Level::Spec)),
            (Level::Spec, "predictor" | "transformer" | "explainer") => Some(Child::Object(Level::Component)),
            (Level::Component, "model") => Some(Child::Object(Level::Model)),
            (Level::Component, "art") => Some(Child::Object(Level::Art)),
            (Level::Component, framework) if FRAMEWORKS.contains(&framework) => Some(Child::Object(Level::Framework)),
            (Level::Component, "containers" | "initContainers") => Some(Child::List(Level::Container)),
            (Level::Component, "batcher") => Some(Child::Object(Level::Batcher)),
            (Level::Component, "logger") => Some(Child::Object(Level::Logger)),
            (Level::Model, "modelFormat") => Some(Child::Object(Level::ModelFormat)),
            _ => None,
        }
    }
}

/// Every field of `manifest` (an InferenceService as written) that KServe does not declare, as a
/// path in `kubectl`'s words (`spec.predictor.minReplica`, `spec.predictor.containers[0].imag`),
/// each level's keys in alphabetical order.
pub fn unknown_fields(manifest: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(manifest, Level::Root, "", &mut out);
    out
}

fn walk(value: &Value, level: Level, at: &str, out: &mut Vec<String>) {
    let Value::Object(object) = value else { return };
    let known = level.fields();
    for (key, value) in object {
        let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
        if known.binary_search(&key.as_str()).is_err() {
            out.push(path);
            continue;
        }
        match level.child(key) {
            Some(Child::Object(child)) => walk(value, child, &path, out),
            Some(Child::List(child)) => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    walk(item, child, &format!("{path}[{i}]"), out);
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_misspelt_field_is_named_with_its_path_at_every_level() {
        let manifest = json!({
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "iris", "labes": {"a": "b"}},
            "spec": {
                "predictor": {
                    "minReplica": 0,
                    "serviceAccountName": "reader",
                    "tolerations": [{"key": "gpu", "anything": true}],
                    "model": {"modelFormat": {"name": "onnx", "versoin": "1"}, "storageURI": "file://m"},
                    "containers": [{"name": "a", "image": "x"}, {"name": "b", "imag": "y"}],
                    "batcher": {"maxBatchSize": 8, "maxLatencyMs": 5},
                },
                "transformer": {"containers": [{"name": "t", "image": "t"}], "logger": {"url": "http://x", "modes": "all"}},
                "explainer": {"art": {"type": "SquareAttack", "confg": {}}},
                "predictors": {},
            },
            "extra": 1,
        });
        assert_eq!(
            unknown_fields(&manifest),
            [
                "extra",
                "metadata.labes",
                "spec.explainer.art.confg",
                "spec.predictor.batcher.maxLatencyMs",
                "spec.predictor.containers[1].imag",
                "spec.predictor.minReplica",
                "spec.predictor.model.modelFormat.versoin",
                "spec.predictor.model.storageURI",
                "spec.predictors",
                "spec.transformer.logger.modes",
            ]
        );
    }

    #[test]
    fn kserves_fields_are_known_at_every_level() {
        let manifest = json!({
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": "n", "labels": {}, "annotations": {}, "finalizers": []},
            "spec": {
                "predictor": {
                    "minReplicas": 0, "nodeSelector": {"x": "y"}, "workerSpec": {"tensorParallelSize": 2},
                    "sklearn": {"storageUri": "gs://b/m", "resources": {}, "runtimeVersion": "1"},
                    "initContainers": [{"name": "i", "image": "i", "volumeMounts": []}],
                    "logger": {"mode": "all", "url": "http://x", "metadataHeaders": ["a"]},
                    "batcher": {"timeout": 60},
                },
                "explainer": {"art": {"type": "SquareAttack", "config": {"a": "1"}, "storageUri": "gs://b/a"}},
            },
            "status": {"url": "http://m"},
        });
        assert_eq!(unknown_fields(&manifest), Vec::<String>::new());
    }

    #[test]
    fn no_level_names_a_field_twice() {
        for level in Level::ALL {
            let fields = level.fields();
            assert!(fields.windows(2).all(|w| w[0] < w[1]), "{level:?}: {fields:?}");
        }
    }
}
