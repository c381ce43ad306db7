//! The objects of one revision of a component, as pure functions of the InferenceService and the
//! platform settings: a Deployment running `skiff-server` on an ONNX model, the container of the
//! KServe ServingRuntime chosen for any other model (behind the queue-proxy, see
//! [`runtime_server`]), or the user's custom container (which is what a transformer or an
//! explainer always is), and a Service (port 80 to the container port) that the router and
//! activator find by its labels.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, Service, ServicePort,
    ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value, json};
use skiff_api::isvc::{ModelSpec, PredictorSpec};
use skiff_api::labels::{
    APPLIED_HASH, COMPONENT, CONTAINER_CONCURRENCY, FIELD_MANAGER, INFERENCE_SERVICE, INITIAL_SCALE,
    QUEUE_PROXY as QUEUE_PROXY_LABEL, REVISION, REVISION_NAME, RUNTIME, SCALING, TEMPLATE_HASH, TIMEOUT_SECONDS,
};
use skiff_api::revision::Component;
use skiff_api::runtime::{SelectedRuntime, uses_embedded_server};
use skiff_api::scaling::ScalingInputs;
use skiff_api::serving::{Served, batcher_args, component_contract, logger_args, predictor_host, server_args};

use crate::platform::Platform;
use crate::storage::{self, ModelSource};

/// The port `skiff-server` (and, by KServe's convention, a custom container) listens on.
pub const SERVER_PORT: i32 = 8080;
/// The port of a revision's Service.
pub const SERVICE_PORT: i32 = 80;
/// The queue-proxy's port in a custom container's pod (Knative's).
pub const QUEUE_PROXY_PORT: i32 = 8012;
/// The queue-proxy sidecar's container name (Knative's).
pub const QUEUE_PROXY: &str = "queue-proxy";
/// Seconds a model pod (the model server, or the queue-proxy in front of a custom container) keeps
/// serving after SIGTERM, readiness off, so that routers and activators see it leave its
/// EndpointSlice before it closes its listener.
const SHUTDOWN_DELAY_SECS: u32 = 3;
/// KServe's name for the serving container.
pub const CONTAINER_NAME: &str = "kserve-container";
/// KServe's name for the volume the model is provided in.
const MODEL_VOLUME: &str = "kserve-provision-location";
/// Where a ServingRuntime's container finds the model (KServe's `DefaultModelLocalMountPath`; its
/// runtimes pass `--model_dir=/mnt/models`).
pub const RUNTIME_MODEL_DIR: &str = "/mnt/models";
/// Container fields of `spec.predictor.model` laid over a ServingRuntime's container (KServe's
/// `MergeRuntimeContainers`): lists of named things (`env`, `ports`) merged by name, `volumeMounts`
/// by path, `args` and `envFrom` appended, `resources` merged per key, the rest replaced.
const RUNTIME_CONTAINER_FIELDS: [&str; 12] = [
    "resources",
    "env",
    "envFrom",
    "securityContext",
    "imagePullPolicy",
    "volumeMounts",
    "args",
    "command",
    "image",
    "ports",
    "readinessProbe",
    "livenessProbe",
];
/// PodSpec fields KServe accepts inline in `spec.predictor`, passed to the pod as written.
const POD_FIELDS: [&str; 18] = [
    "serviceAccountName",
    "nodeSelector",
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
];
/// Container fields KServe accepts in `spec.predictor.model`, passed to the server's container.
const MODEL_CONTAINER_FIELDS: [&str; 6] =
    ["resources", "env", "envFrom", "securityContext", "imagePullPolicy", "volumeMounts"];

/// What the router and the activator read of a revision, from its Service's labels (copied to
/// its EndpointSlices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serving {
    /// `containerConcurrency` (0 = unlimited).
    pub container_concurrency: u32,
    /// The request timeout in seconds.
    pub timeout_secs: u64,
    /// Whether requests enter through the queue-proxy sidecar (a custom container).
    pub queue_proxy: bool,
}

impl Default for Serving {
    fn default() -> Self {
        Serving {
            container_concurrency: 0,
            timeout_secs: skiff_api::serving::DEFAULT_TIMEOUT.as_secs(),
            queue_proxy: false,
        }
    }
}

impl Serving {
    /// A component's settings (`spec.predictor`, `spec.transformer`, ...). Requests go through the
    /// queue-proxy for a custom container and for a model a ServingRuntime serves (any model but
    /// ONNX without `runtime:`).
    pub fn of(predictor: &PredictorSpec) -> Serving {
        let queue_proxy = match &predictor.model {
            Some(model) => !uses_embedded_server(model),
            None => predictor.containers.is_some(),
        };
        Serving {
            container_concurrency: predictor.container_concurrency.and_then(|n| u32::try_from(n).ok()).unwrap_or(0),
            timeout_secs: skiff_api::serving::request_timeout(predictor).as_secs(),
            queue_proxy,
        }
    }

    /// Read back from a revision object's labels (absent: the defaults).
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Serving {
        let defaults = Serving::default();
        Serving {
            container_concurrency: labels
                .get(CONTAINER_CONCURRENCY)
                .and_then(|v| v.parse().ok())
                .unwrap_or(defaults.container_concurrency),
            timeout_secs: labels.get(TIMEOUT_SECONDS).and_then(|v| v.parse().ok()).unwrap_or(defaults.timeout_secs),
            queue_proxy: labels.get(QUEUE_PROXY_LABEL).is_some_and(|v| v == "true"),
        }
    }
}

/// What a revision's Deployment records for later passes and for the autoscaler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Hash of the template it runs.
    pub template_hash: String,
    /// Replicas it was created with.
    pub initial_scale: u32,
    /// Its autoscaling inputs.
    pub scaling: ScalingInputs,
}

/// Which revision of which component of which InferenceService an object belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRef {
    /// The InferenceService.
    pub service: String,
    /// Its namespace.
    pub namespace: String,
    /// The component the revision runs.
    pub component: Component,
    /// `<service>-<component>-NNNNN`.
    pub name: String,
    /// `NNNNN` (numbered per component).
    pub number: u32,
    /// Its concurrency and timeout.
    pub serving: Serving,
}

impl RevisionRef {
    /// Who the revision's pods are, for what they report.
    pub fn served(&self) -> Served<'_> {
        Served {
            inference_service: &self.service,
            namespace: &self.namespace,
            component: self.component.name(),
            revision: &self.name,
        }
    }

    /// Labels of the revision's Deployment and Service: the InferenceService, the component
    /// (KServe's `component` label), the revision's number and name, its serving settings.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector();
        labels.insert(REVISION.into(), self.number.to_string());
        labels.insert(COMPONENT.into(), self.component.name().into());
        labels.insert(REVISION_NAME.into(), self.name.clone());
        labels.insert("app.kubernetes.io/managed-by".into(), FIELD_MANAGER.into());
        labels.insert(CONTAINER_CONCURRENCY.into(), self.serving.container_concurrency.to_string());
        labels.insert(TIMEOUT_SECONDS.into(), self.serving.timeout_secs.to_string());
        if self.serving.queue_proxy {
            labels.insert(QUEUE_PROXY_LABEL.into(), "true".into());
        }
        labels
    }

    /// Labels of the revision's pods: [`RevisionRef::labels`], less the revision's number for a
    /// transformer or explainer (see [`RevisionRef::selector`]).
    pub fn pod_labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        if self.component != Component::Predictor {
            labels.remove(REVISION);
        }
        labels
    }

    /// The labels that select the revision's pods. A predictor's are the InferenceService and the
    /// revision's number, as they always were (a Deployment's selector cannot change). Numbers
    /// repeat across components (`iris-predictor-00001`, `iris-transformer-00001`), so the pods of
    /// a transformer or explainer carry no number, which keeps them out of the predictor's
    /// selector, and are selected by the revision's name instead.
    pub fn selector(&self) -> BTreeMap<String, String> {
        let isvc = (INFERENCE_SERVICE.to_owned(), self.service.clone());
        match self.component {
            Component::Predictor => [isvc, (REVISION.to_owned(), self.number.to_string())].into(),
            Component::Transformer | Component::Explainer => {
                [isvc, (REVISION_NAME.to_owned(), self.name.clone())].into()
            }
        }
    }

    fn metadata(&self, owner: &OwnerReference, annotations: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.clone()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// A new revision's Deployment; `predictor` is the spec of the revision's component
/// (`spec.predictor`, `spec.transformer`, ...). `replicas` is set only while the controller owns
/// the field (see [`crate::plan::replicas_to_apply`]); the [`Record`] is kept in annotations so
/// that readiness without pods survives restarts and the autoscaler finds the revision's settings
/// (each component's revisions scale on their own). `runtime` is the ServingRuntime chosen for the
/// predictor's model (`None` for `skiff-server` and custom containers): its container serves, and
/// its name is recorded on the Deployment ([`RUNTIME`]). The error (for the status) names the
/// field that cannot be served.
pub fn deployment(
    revision: &RevisionRef,
    owner: &OwnerReference,
    predictor: &PredictorSpec,
    record: &Record,
    replicas: Option<i32>,
    platform: &Platform,
    runtime: Option<&SelectedRuntime>,
) -> Result<Deployment, String> {
    let pod = pod_spec(revision, predictor, platform, runtime)?;
    let at = format!("spec.{}", revision.component.name());
    let scaling = serde_json::to_string(&record.scaling).map_err(|e| format!("{at}: {e}"))?;
    let mut annotations: BTreeMap<String, String> = [
        (TEMPLATE_HASH.to_owned(), record.template_hash.clone()),
        (INITIAL_SCALE.to_owned(), record.initial_scale.to_string()),
        (SCALING.to_owned(), scaling),
    ]
    .into();
    // The runtime's pod labels and annotations, under the revision's own labels.
    let mut pod_labels = revision.pod_labels();
    let mut pod_annotations = BTreeMap::new();
    if let Some(runtime) = runtime {
        annotations.insert(RUNTIME.to_owned(), format!("{}/{}", runtime.kind, runtime.name));
        for (key, value) in &runtime.spec.labels {
            pod_labels.entry(key.clone()).or_insert_with(|| value.clone());
        }
        pod_annotations.extend(runtime.spec.annotations.clone());
    }
    let mut deployment = Deployment {
        metadata: revision.metadata(owner, annotations),
        spec: Some(DeploymentSpec {
            replicas: None,
            selector: LabelSelector { match_labels: Some(revision.selector()), ..LabelSelector::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: (!pod_annotations.is_empty()).then_some(pod_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    };
    stamp(&mut deployment.metadata, &deployment.spec);
    if let Some(spec) = deployment.spec.as_mut() {
        spec.replicas = replicas;
    }
    Ok(deployment)
}

/// The Service of a revision whose pods listen on `port`.
pub fn service(revision: &RevisionRef, owner: &OwnerReference, port: i32) -> Service {
    let mut service = Service {
        metadata: revision.metadata(owner, BTreeMap::new()),
        spec: Some(ServiceSpec {
            selector: Some(revision.selector()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: SERVICE_PORT,
                target_port: Some(IntOrString::Int(port)),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    };
    stamp(&mut service.metadata, &service.spec);
    service
}

/// The hash of what is applied, read back to apply again only when it changes.
pub fn applied_hash(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations.as_ref()?.get(APPLIED_HASH).map(String::as_str)
}

/// Records the hash of the metadata and spec (without the hash itself) in an annotation.
fn stamp<S: serde::Serialize>(meta: &mut ObjectMeta, spec: &S) {
    let hash = crate::hash::of(&(&*meta, spec));
    meta.annotations.get_or_insert_with(BTreeMap::new).insert(APPLIED_HASH.into(), hash);
}

/// The pod: the user's pod-level fields (over the runtime's, when a runtime serves), then the
/// model server, the runtime's container behind the queue-proxy ([`runtime_server`]), or the
/// custom container behind the queue-proxy (with KServe's contract for a transformer's or
/// explainer's container, see [`component_args`]); the restricted profile under every security
/// context ([`security`]).
fn pod_spec(
    revision: &RevisionRef,
    predictor: &PredictorSpec,
    platform: &Platform,
    runtime: Option<&SelectedRuntime>,
) -> Result<PodSpec, String> {
    let at = format!("spec.{}", revision.component.name());
    let mut pod: PodSpec = match (runtime, &predictor.model) {
        (Some(runtime), Some(_)) => {
            // KServe's MergePodSpec: the runtime's pod fields, each replaced by the predictor's.
            let mut fields = runtime.spec.other.clone();
            fields.extend(predictor.other.clone());
            let mut pod: PodSpec = from_fields(&fields, &POD_FIELDS, &at)?;
            pod.volumes.get_or_insert_with(Vec::new).extend(runtime.spec.volumes.iter().cloned());
            pod
        }
        _ => from_fields(&predictor.other, &POD_FIELDS, &at)?,
    };
    pod.enable_service_links.get_or_insert(false);
    if let Some(model) = &predictor.model {
        pod.automount_service_account_token.get_or_insert(false);
        match runtime {
            Some(runtime) => runtime_server(revision, model, predictor, runtime, platform, &mut pod)?,
            None => model_server(revision, model, predictor, platform, &mut pod)?,
        }
    } else if let Some(containers) = &predictor.containers {
        custom_containers(containers, &mut pod, &at)?;
        let upstream =
            pod.containers[0].ports.as_ref().and_then(|p| p.first()).map_or(SERVER_PORT, |p| p.container_port);
        if revision.component != Component::Predictor {
            component_args(&mut pod.containers[0], revision, upstream, platform);
        }
        pod.containers.push(queue_proxy(upstream, revision, predictor, platform));
    } else {
        let framework = skiff_api::validate::FRAMEWORKS.iter().find(|f| predictor.other.contains_key(**f));
        return Err(format!(
            "{at}.{}: Skiff serves `model` (ONNX) and custom `containers`; framework shorthands are not served",
            framework.unwrap_or(&"model")
        ));
    }
    security::harden(&mut pod).map_err(|e| format!("{at}.{e}"))?;
    Ok(pod)
}

/// KServe's contract for the container of a transformer or explainer (its `GetContainer`), each
/// argument only when the container does not pass it already: `--model_name <isvc>`,
/// `--predictor_host <host>` and `--http_port <port>` (the port the queue-proxy forwards to,
/// KServe's 8080 unless the container declares another), and the variable `PREDICTOR_HOST` unless
/// set. The predictor host is the router with the path that addresses the predictor alone
/// ([`predictor_host`]): `<router>/serving/<namespace>/<isvc>-predictor`. A path prefix rather
/// than a host per component, because then no component needs a DNS name of its own (Skiff makes
/// no Service per component, only per revision, and the router's one Service name is all that
/// must resolve); and through the router, the call reaches the predictor's revisions by their
/// traffic split and is held by the activator while the predictor scales from zero.
fn component_args(container: &mut Container, revision: &RevisionRef, port: i32, platform: &Platform) {
    let host = predictor_host(&platform.router_host(), &revision.namespace, &revision.service);
    let (mut args, env) = component_contract(&revision.service, &host);
    args.extend(["--http_port".to_owned(), port.to_string()]);
    let own = container.args.get_or_insert_with(Vec::new);
    for pair in args.chunks(2) {
        let flag = &pair[0];
        if !own.iter().any(|a| a == flag || a.starts_with(&format!("{flag}="))) {
            own.extend(pair.iter().cloned());
        }
    }
    let vars = container.env.get_or_insert_with(Vec::new);
    for (name, value) in env {
        if !vars.iter().any(|v| v.name == name) {
            vars.push(EnvVar { name, value: Some(value), ..EnvVar::default() });
        }
    }
}

/// `skiff-server` on the model, mounted at the platform's model folder.
fn model_server(
    revision: &RevisionRef,
    model: &ModelSpec,
    predictor: &PredictorSpec,
    platform: &Platform,
    pod: &mut PodSpec,
) -> Result<(), String> {
    if !uses_embedded_server(model) {
        return Err(format!(
            "spec.predictor.model.modelFormat.name: skiff-server serves onnx models, not {:?} (a ServingRuntime \
             serves other formats)",
            model.model_format.name
        ));
    }
    let dir = platform.model_dir.clone();
    let mut container: Container = from_fields(&model.other, &MODEL_CONTAINER_FIELDS, "spec.predictor.model")?;
    container.name = CONTAINER_NAME.into();
    container.image = Some(platform.server_image.clone());
    let mut args = server_args(&revision.service, &dir, SERVER_PORT as u16, predictor);
    args.extend(logger_args(predictor, revision.served(), &platform.logger_sinks));
    args.extend(["--shutdown-delay-secs".to_owned(), SHUTDOWN_DELAY_SECS.to_string()]);
    // Why a model did not load reaches the pod's lastState.terminated.message (KServe reads it as
    // ModelLoadFailed); the log's end stands in when the server could not write it.
    args.extend(["--termination-message-path".to_owned(), TERMINATION_MESSAGE_PATH.to_owned()]);
    container.args = Some(args);
    container.termination_message_path = Some(TERMINATION_MESSAGE_PATH.into());
    container.termination_message_policy = Some("FallbackToLogsOnError".into());
    container.ports = Some(vec![ContainerPort {
        name: Some("http1".into()),
        container_port: SERVER_PORT,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }]);
    container.readiness_probe = Some(probe("/v2/health/ready", 1, 3));
    container.liveness_probe = Some(probe("/v2/health/live", 10, 3));
    provision_model(model, &dir, platform, pod, &mut container)?;
    // After the model's mount: a node agent that binds mounts in order resolves the model's host
    // path before `/tmp` is covered.
    security::read_only_root(&mut container).map_err(|e| format!("spec.predictor.model.{e}"))?;
    pod.containers = vec![container];
    Ok(())
}

/// Where `skiff-server` writes why it stopped: Kubernetes' default `terminationMessagePath`.
const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

/// Provides the model's `storageUri` to `container` at `dir`, read-only: `file://` as a hostPath
/// volume (where the platform allows it), `pvc://` as the claim's volume (its sub-path), anything
/// else downloaded by KServe's storage initializer (an init container) into an emptyDir.
fn provision_model(
    model: &ModelSpec,
    dir: &str,
    platform: &Platform,
    pod: &mut PodSpec,
    container: &mut Container,
) -> Result<(), String> {
    let uri = model.storage_uri.as_deref().unwrap_or_default();
    let source = storage::parse(uri).map_err(|e| format!("spec.predictor.model.storageUri: {e}"))?;
    if matches!(source, ModelSource::HostPath(_)) && !platform.allow_host_path {
        return Err(format!(
            "spec.predictor.model.storageUri: {uri}: file:// (a directory of the node, as a hostPath volume) is \
             refused on this cluster: inferenceservice-config key skiff sets allowHostPath to false; use pvc:// or \
             a scheme the storage initializer downloads"
        ));
    }
    let dir = dir.to_owned();
    let mount = |sub_path: Option<String>| VolumeMount {
        name: MODEL_VOLUME.into(),
        mount_path: dir.clone(),
        read_only: Some(true),
        sub_path,
        ..VolumeMount::default()
    };
    let (volume, mount) = match source {
        ModelSource::HostPath(path) => (volume(json!({"hostPath": {"path": path, "type": "Directory"}})), mount(None)),
        ModelSource::Pvc { claim, path } => (
            volume(json!({"persistentVolumeClaim": {"claimName": claim, "readOnly": true}})),
            mount((!path.is_empty()).then_some(path)),
        ),
        ModelSource::Download(uri) => {
            let mut init = Container {
                name: "storage-initializer".into(),
                image: Some(platform.storage_initializer_image.clone()),
                args: Some(vec![uri, dir.clone()]),
                volume_mounts: Some(vec![VolumeMount { read_only: None, ..mount(None) }]),
                ..Container::default()
            };
            security::read_only_root(&mut init)?;
            security::scratch_home(&mut init);
            pod.init_containers.get_or_insert_with(Vec::new).push(init);
            (volume(json!({"emptyDir": {}})), mount(None))
        }
    };
    pod.volumes.get_or_insert_with(Vec::new).push(volume);
    container.volume_mounts.get_or_insert_with(Vec::new).push(mount);
    Ok(())
}

/// The container of the ServingRuntime chosen for the model (KServe's predictor for a runtime):
/// the runtime's container named `kserve-container` (else its first) serves, with the model's own
/// container fields laid over it ([`RUNTIME_CONTAINER_FIELDS`]) and KServe's placeholders
/// (`{{.Name}}`: the InferenceService, `{{.Namespace}}`) replaced in every runtime container; the
/// model is provided at [`RUNTIME_MODEL_DIR`] as for `skiff-server` ([`provision_model`]); `PORT`
/// is set to the port it serves on (its first declared port, else 8080) unless given; the runtime's
/// other containers follow it, and the queue-proxy fronts it (concurrency, the in-flight gauge the
/// autoscaler reads, the logger and the batcher), as for a custom container. The runtime's image
/// is not Skiff's, so its root file system stays writable, as a custom container's does.
fn runtime_server(
    revision: &RevisionRef,
    model: &ModelSpec,
    predictor: &PredictorSpec,
    runtime: &SelectedRuntime,
    platform: &Platform,
    pod: &mut PodSpec,
) -> Result<(), String> {
    let at = format!("{} {:?}", runtime.kind, runtime.name);
    let mut containers = runtime.spec.containers.clone();
    if containers.is_empty() {
        return Err(format!("spec.predictor.model.runtime: {at} has no containers"));
    }
    let serving = containers.iter().position(|c| c.name == CONTAINER_NAME).unwrap_or(0);
    let first = containers.remove(serving);
    containers.insert(0, first);
    for container in &mut containers {
        *container = replace_placeholders(container, &revision.service, &revision.namespace)
            .map_err(|e| format!("spec.predictor.model.runtime: {at}: containers[{:?}]: {e}", container.name))?;
    }
    let serving = &mut containers[0];
    let mut value = serde_json::to_value(&*serving).map_err(|e| format!("{at}: {e}"))?;
    for field in RUNTIME_CONTAINER_FIELDS {
        if let Some(given) = model.other.get(field) {
            merge_container_field(&mut value, field, given);
        }
    }
    *serving = serde_json::from_value(value).map_err(|e| format!("spec.predictor.model: {e}"))?;
    if serving.ports.as_ref().is_none_or(Vec::is_empty) {
        serving.ports = Some(vec![ContainerPort {
            name: Some("http1".into()),
            container_port: SERVER_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]);
    }
    let upstream = serving.ports.as_ref().and_then(|p| p.first()).map_or(SERVER_PORT, |p| p.container_port);
    let env = serving.env.get_or_insert_with(Vec::new);
    if !env.iter().any(|v| v.name == "PORT") {
        env.push(EnvVar { name: "PORT".into(), value: Some(upstream.to_string()), ..EnvVar::default() });
    }
    provision_model(model, RUNTIME_MODEL_DIR, platform, pod, serving)?;
    containers.push(queue_proxy(upstream, revision, predictor, platform));
    pod.containers = containers;
    Ok(())
}

/// KServe's `ReplacePlaceholders`: `{{.Name}}` and `{{.Namespace}}` (spaces inside the braces
/// allowed) anywhere in the container become the InferenceService's name and namespace.
fn replace_placeholders(container: &Container, name: &str, namespace: &str) -> Result<Container, String> {
    let mut text = serde_json::to_string(container).map_err(|e| e.to_string())?;
    for (key, value) in [("Name", name), ("Namespace", namespace)] {
        for pattern in [format!("{{{{.{key}}}}}"), format!("{{{{ .{key} }}}}")] {
            text = text.replace(&pattern, value);
        }
    }
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// Lays the model's value of one container field over the runtime container's (as JSON), as
/// [`RUNTIME_CONTAINER_FIELDS`] says.
fn merge_container_field(container: &mut Value, field: &str, given: &Value) {
    let Some(object) = container.as_object_mut() else { return };
    let current = object.remove(field);
    let merged = match (field, current, given) {
        ("env" | "ports", Some(Value::Array(mut own)), Value::Array(theirs)) => {
            merge_by_key(&mut own, theirs, "name");
            Value::Array(own)
        }
        ("volumeMounts", Some(Value::Array(mut own)), Value::Array(theirs)) => {
            merge_by_key(&mut own, theirs, "mountPath");
            Value::Array(own)
        }
        ("args" | "envFrom", Some(Value::Array(mut own)), Value::Array(theirs)) => {
            own.extend(theirs.iter().cloned());
            Value::Array(own)
        }
        ("resources", Some(Value::Object(mut own)), Value::Object(theirs)) => {
            for (kind, amounts) in theirs {
                match (own.get_mut(kind), amounts) {
                    (Some(Value::Object(mine)), Value::Object(amounts)) => {
                        mine.extend(amounts.iter().map(|(k, v)| (k.clone(), v.clone())));
                    }
                    _ => {
                        own.insert(kind.clone(), amounts.clone());
                    }
                }
            }
            Value::Object(own)
        }
        _ => given.clone(),
    };
    object.insert(field.to_owned(), merged);
}

/// `theirs` over `own`: an entry with the same `key` replaced in place, the others appended.
fn merge_by_key(own: &mut Vec<Value>, theirs: &[Value], key: &str) {
    for entry in theirs {
        match own.iter_mut().find(|e| e.get(key).is_some() && e.get(key) == entry.get(key)) {
            Some(existing) => *existing = entry.clone(),
            None => own.push(entry.clone()),
        }
    }
}

/// The queue-proxy sidecar in front of a custom container on `upstream`: it enforces
/// `containerConcurrency`, exposes the in-flight gauge the autoscaler scrapes, answers the
/// revision's Service on [`QUEUE_PROXY_PORT`], and is KServe's agent for the container: the
/// request logger (`predictor.logger`) and the batcher (`predictor.batcher`), with the flags
/// `skiff-server` gets for them.
fn queue_proxy(upstream: i32, revision: &RevisionRef, predictor: &PredictorSpec, platform: &Platform) -> Container {
    let serving = revision.serving;
    let mut args: Vec<String> = [
        "queue-proxy".to_owned(),
        "--port".into(),
        QUEUE_PROXY_PORT.to_string(),
        "--upstream".into(),
        format!("127.0.0.1:{upstream}"),
        "--container-concurrency".into(),
        serving.container_concurrency.to_string(),
        "--timeout-secs".into(),
        serving.timeout_secs.to_string(),
        "--drain-delay-secs".into(),
        SHUTDOWN_DELAY_SECS.to_string(),
    ]
    .into();
    args.extend(batcher_args(predictor));
    args.extend(logger_args(predictor, revision.served(), &platform.logger_sinks));
    Container {
        name: QUEUE_PROXY.into(),
        image: Some(platform.queue_proxy_image.clone()),
        args: Some(args),
        ports: Some(vec![ContainerPort {
            name: Some("queue-port".into()),
            container_port: QUEUE_PROXY_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".into()),
                port: IntOrString::Int(QUEUE_PROXY_PORT),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        security_context: serde_json::from_value(json!({
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]},
        }))
        .ok(),
        ..Container::default()
    }
}

/// The user's containers as written (`at`: the component's field, for errors); the first one
/// serves (named `kserve-container` when unnamed, port 8080 when it declares none).
fn custom_containers(containers: &[Value], pod: &mut PodSpec, at: &str) -> Result<(), String> {
    let mut parsed = Vec::with_capacity(containers.len());
    for (i, value) in containers.iter().enumerate() {
        let mut value = value.clone();
        if i == 0
            && let Some(object) = value.as_object_mut()
        {
            object.entry("name").or_insert_with(|| CONTAINER_NAME.into());
        }
        let container: Container = serde_json::from_value(value).map_err(|e| format!("{at}.containers[{i}]: {e}"))?;
        parsed.push(container);
    }
    let Some(first) = parsed.first_mut() else {
        return Err(format!("{at}.containers: at least one container is needed"));
    };
    if first.ports.as_ref().is_none_or(Vec::is_empty) {
        first.ports = Some(vec![ContainerPort {
            name: Some("http1".into()),
            container_port: SERVER_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]);
    }
    pod.containers = parsed;
    Ok(())
}

fn probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(SERVER_PORT),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

fn volume(source: Value) -> Volume {
    let mut object = source.as_object().cloned().unwrap_or_default();
    object.insert("name".into(), MODEL_VOLUME.into());
    serde_json::from_value(Value::Object(object)).unwrap_or_default()
}

/// A k8s type from the named fields of a map of extra fields; the error names the field.
fn from_fields<T: serde::de::DeserializeOwned + Default>(
    other: &BTreeMap<String, Value>,
    fields: &[&str],
    at: &str,
) -> Result<T, String> {
    let picked: Map<String, Value> =
        other.iter().filter(|(k, _)| fields.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    if picked.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_value(Value::Object(picked)).map_err(|e| format!("{at}: {e}"))
}

mod security;
#[cfg(test)]
mod tests;
