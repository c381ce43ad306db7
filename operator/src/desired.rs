//! The objects of one revision, as pure functions of the InferenceService and the platform settings:
//! a Deployment running `skiff-server` on the model (or the user's custom container) and a Service
//! (port 80 to the container port) that the router and activator find by its labels.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, HTTPGetAction, PodSpec, PodTemplateSpec, Probe, Service, ServicePort, ServiceSpec,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value, json};
use skiff_api::isvc::{ModelSpec, PredictorSpec};
use skiff_api::labels::{
    APPLIED_HASH, COMPONENT, FIELD_MANAGER, INFERENCE_SERVICE, INITIAL_SCALE, REVISION, REVISION_NAME, TEMPLATE_HASH,
};

use crate::platform::Platform;
use crate::storage::{self, ModelSource};

/// The port `skiff-server` (and, by KServe's convention, a custom container) listens on.
pub const SERVER_PORT: i32 = 8080;
/// The port of a revision's Service.
pub const SERVICE_PORT: i32 = 80;
/// KServe's name for the serving container.
pub const CONTAINER_NAME: &str = "kserve-container";
/// KServe's name for the volume the model is provided in.
const MODEL_VOLUME: &str = "kserve-provision-location";
/// The component label's value.
const PREDICTOR: &str = "predictor";
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

/// Which revision of which InferenceService an object belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionRef {
    /// The InferenceService.
    pub service: String,
    /// Its namespace.
    pub namespace: String,
    /// `<service>-predictor-NNNNN`.
    pub name: String,
    /// `NNNNN`.
    pub number: u32,
}

impl RevisionRef {
    /// Labels of the revision's Deployment, pods and Service.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector();
        labels.insert(COMPONENT.into(), PREDICTOR.into());
        labels.insert(REVISION_NAME.into(), self.name.clone());
        labels.insert("app.kubernetes.io/managed-by".into(), FIELD_MANAGER.into());
        labels
    }

    /// The labels that select the revision's pods.
    pub fn selector(&self) -> BTreeMap<String, String> {
        [(INFERENCE_SERVICE.to_owned(), self.service.clone()), (REVISION.to_owned(), self.number.to_string())].into()
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

/// A new revision's Deployment. `replicas` is set only while the controller owns the field (see
/// [`crate::plan::replicas_to_apply`]); `initial_scale` is recorded so that readiness without pods
/// survives restarts. The error (for the status) names the field that cannot be served.
pub fn deployment(
    revision: &RevisionRef,
    owner: &OwnerReference,
    predictor: &PredictorSpec,
    template_hash: &str,
    initial_scale: u32,
    replicas: Option<i32>,
    platform: &Platform,
) -> Result<Deployment, String> {
    let pod = pod_spec(&revision.service, predictor, platform)?;
    let annotations =
        [(TEMPLATE_HASH.to_owned(), template_hash.to_owned()), (INITIAL_SCALE.to_owned(), initial_scale.to_string())];
    let mut deployment = Deployment {
        metadata: revision.metadata(owner, annotations.into()),
        spec: Some(DeploymentSpec {
            replicas: None,
            selector: LabelSelector { match_labels: Some(revision.selector()), ..LabelSelector::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(revision.labels()), ..ObjectMeta::default() }),
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

/// The pod: the user's pod-level fields, then the model server or the custom container.
fn pod_spec(service: &str, predictor: &PredictorSpec, platform: &Platform) -> Result<PodSpec, String> {
    let mut pod: PodSpec = from_fields(&predictor.other, &POD_FIELDS, "spec.predictor")?;
    pod.enable_service_links.get_or_insert(false);
    if let Some(model) = &predictor.model {
        pod.automount_service_account_token.get_or_insert(false);
        model_server(service, model, predictor, platform, &mut pod)?;
    } else if let Some(containers) = &predictor.containers {
        custom_containers(containers, &mut pod)?;
    } else {
        let framework = skiff_api::validate::FRAMEWORKS.iter().find(|f| predictor.other.contains_key(**f));
        return Err(format!(
            "spec.predictor.{}: Skiff serves `model` (ONNX) and custom `containers`; framework shorthands are not served",
            framework.unwrap_or(&"model")
        ));
    }
    Ok(pod)
}

/// `skiff-server` on the model, mounted at the platform's model folder.
fn model_server(
    service: &str,
    model: &ModelSpec,
    predictor: &PredictorSpec,
    platform: &Platform,
    pod: &mut PodSpec,
) -> Result<(), String> {
    if !model.model_format.name.eq_ignore_ascii_case("onnx") {
        return Err(format!(
            "spec.predictor.model.modelFormat.name: skiff-server serves onnx models, not {:?} (use a custom container)",
            model.model_format.name
        ));
    }
    if model.protocol_version.as_deref() == Some("grpc-v2") {
        return Err("spec.predictor.model.protocolVersion: grpc-v2 is not served yet (v1 and v2 REST are)".into());
    }
    let uri = model.storage_uri.as_deref().unwrap_or_default();
    let source = storage::parse(uri).map_err(|e| format!("spec.predictor.model.storageUri: {e}"))?;
    let dir = platform.model_dir.clone();
    let mut container: Container = from_fields(&model.other, &MODEL_CONTAINER_FIELDS, "spec.predictor.model")?;
    container.name = CONTAINER_NAME.into();
    container.image = Some(platform.server_image.clone());
    container.args = Some(server_args(service, &dir, predictor));
    container.ports = Some(vec![ContainerPort {
        name: Some("http1".into()),
        container_port: SERVER_PORT,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }]);
    container.readiness_probe = Some(probe("/v2/health/ready", 1, 3));
    container.liveness_probe = Some(probe("/v2/health/live", 10, 3));
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
            pod.init_containers.get_or_insert_with(Vec::new).push(Container {
                name: "storage-initializer".into(),
                image: Some(platform.storage_initializer_image.clone()),
                args: Some(vec![uri, dir.clone()]),
                volume_mounts: Some(vec![VolumeMount { read_only: None, ..mount(None) }]),
                ..Container::default()
            });
            (volume(json!({"emptyDir": {}})), mount(None))
        }
    };
    pod.volumes.get_or_insert_with(Vec::new).push(volume);
    container.volume_mounts.get_or_insert_with(Vec::new).push(mount);
    pod.containers = vec![container];
    Ok(())
}

/// `skiff-server`'s arguments for this predictor.
fn server_args(service: &str, model_dir: &str, predictor: &PredictorSpec) -> Vec<String> {
    let mut args: Vec<String> =
        ["--model-dir", model_dir, "--model-name", service, "--http-port"].map(str::to_owned).into();
    args.push(SERVER_PORT.to_string());
    if let Some(n) = predictor.container_concurrency.filter(|n| *n > 0) {
        args.extend(["--container-concurrency".into(), n.to_string()]);
    }
    if let Some(batcher) = &predictor.batcher {
        args.push("--enable-batching".into());
        if let Some(n) = batcher.max_batch_size {
            args.extend(["--max-batch-size".into(), n.to_string()]);
        }
        if let Some(ms) = batcher.max_latency {
            args.extend(["--max-latency-ms".into(), ms.to_string()]);
        }
    }
    args
}

/// The user's containers as written; the first one serves (named `kserve-container` when unnamed,
/// port 8080 when it declares none).
fn custom_containers(containers: &[Value], pod: &mut PodSpec) -> Result<(), String> {
    let mut parsed = Vec::with_capacity(containers.len());
    for (i, value) in containers.iter().enumerate() {
        let mut value = value.clone();
        if i == 0
            && let Some(object) = value.as_object_mut()
        {
            object.entry("name").or_insert_with(|| CONTAINER_NAME.into());
        }
        let container: Container =
            serde_json::from_value(value).map_err(|e| format!("spec.predictor.containers[{i}]: {e}"))?;
        parsed.push(container);
    }
    let Some(first) = parsed.first_mut() else {
        return Err("spec.predictor.containers: at least one container is needed".into());
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

#[cfg(test)]
mod tests;
