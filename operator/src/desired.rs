//! The objects of one revision of a component, as pure functions of the InferenceService and the
//! platform settings: a Deployment whose pod has one of four shapes, and a Service (port 80 to
//! the container port) that the router and activator find by its labels. One module per shape:
//! `server` runs `skiff-server` on an ONNX model, `runtime` the container of the KServe
//! ServingRuntime chosen for any other model, `container` the user's custom container (which is
//! what a transformer or an explainer always is), each of the last two behind the
//! `queue_proxy` sidecar; `storage` provides the model to the container that serves it,
//! `security` hardens the pod, and `revision` names the revision and writes its labels.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{ContainerPort, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};
use skiff_api::isvc::{DEPLOYMENT_FIELDS, POD_FIELDS, PredictorSpec};
use skiff_api::labels::{APPLIED_HASH, INITIAL_SCALE, RUNTIME, TEMPLATE_HASH};
use skiff_api::revision::Component;
use skiff_api::runtime::SelectedRuntime;
use skiff_api::serving::{DrainArgs, behind_transformer};

use crate::platform::Platform;

pub use queue_proxy::{QUEUE_PROXY, QUEUE_PROXY_PORT};
pub use revision::{Record, RevisionRef};
pub use runtime::RUNTIME_MODEL_DIR;

/// The port `skiff-server` (and, by KServe's convention, a custom container) listens on.
pub const SERVER_PORT: i32 = 8080;
/// The port of a revision's Service.
pub const SERVICE_PORT: i32 = 80;
/// Seconds a model pod (the model server, or the queue-proxy in front of a custom container) keeps
/// serving after SIGTERM, readiness off, so that routers and activators see it leave its
/// EndpointSlice before it closes its listener.
const DRAIN_DELAY_SECS: u64 = 3;

/// The drain of a model pod's front process: [`DRAIN_DELAY_SECS`], then the default timeout.
fn drain() -> DrainArgs {
    DrainArgs { drain_delay_secs: DRAIN_DELAY_SECS, ..DrainArgs::default() }
}
/// KServe's name for the serving container.
pub const CONTAINER_NAME: &str = "kserve-container";
/// The fields of KServe's `ComponentExtensionSpec` that shape the Deployment rather than its pod:
/// labels and annotations for the pods, and the Deployment's rollout strategy.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Extension {
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    deployment_strategy: Option<DeploymentStrategy>,
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
    let mut annotations: BTreeMap<String, String> = [
        (TEMPLATE_HASH.to_owned(), record.template_hash.clone()),
        (INITIAL_SCALE.to_owned(), record.initial_scale.to_string()),
        record.scaling.annotation(),
    ]
    .into();
    let at = format!("spec.{}", revision.component.name());
    let extension: Extension = from_fields(&predictor.other, &DEPLOYMENT_FIELDS, &at)?;
    // The component's own pod labels, then the runtime's, under the revision's own labels; the
    // component's annotations over the runtime's.
    let mut pod_labels = revision.pod_labels();
    for (key, value) in extension.labels {
        pod_labels.entry(key).or_insert(value);
    }
    let mut pod_annotations = BTreeMap::new();
    if let Some(runtime) = runtime {
        annotations.insert(RUNTIME.to_owned(), format!("{}/{}", runtime.kind, runtime.name));
        for (key, value) in &runtime.spec.labels {
            pod_labels.entry(key.clone()).or_insert_with(|| value.clone());
        }
        pod_annotations.extend(runtime.spec.annotations.clone());
    }
    pod_annotations.extend(extension.annotations);
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
            strategy: extension.deployment_strategy,
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

/// The serving container's port, `http1` on `port` ([`SERVER_PORT`], KServe's name and number,
/// unless collocated): the embedded server's, and that of a runtime's or custom container which
/// declares none.
fn serving_ports(port: i32) -> Vec<ContainerPort> {
    vec![ContainerPort {
        name: Some("http1".into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }]
}

/// The hash of what is applied, read back to apply again only when it changes.
pub fn applied_hash(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations.as_ref()?.get(APPLIED_HASH).map(String::as_str)
}

/// Records the hash of the metadata and spec (without the hash itself) in an annotation.
pub(crate) fn stamp<S: serde::Serialize>(meta: &mut ObjectMeta, spec: &S) {
    let hash = crate::hash::of(&(&*meta, spec));
    meta.annotations.get_or_insert_with(BTreeMap::new).insert(APPLIED_HASH.into(), hash);
}

/// The pod: the user's pod-level fields (over the runtime's, when a runtime serves), then the
/// model server, the runtime's container behind the queue-proxy ([`runtime::runtime_server`]), or the
/// custom container behind the queue-proxy (with KServe's contract for a transformer's or
/// explainer's container, see [`container::component_args`]); the restricted profile under every security
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
        let collocated = predictor.containers.is_some() || runtime.is_some_and(collocation::runtime_collocates);
        let (port, server) = if collocated {
            (collocation::COLLOCATED_MODEL_PORT, behind_transformer(predictor))
        } else {
            (SERVER_PORT, predictor.clone())
        };
        match runtime {
            Some(runtime) => runtime::runtime_server(revision, model, &server, runtime, platform, port, &mut pod)?,
            None => server::model_server(revision, model, &server, platform, port, &mut pod)?,
        }
        if collocated {
            let containers = predictor.containers.as_deref().unwrap_or_default();
            collocation::collocate(containers, revision, predictor, platform, &mut pod, &at)?;
        }
    } else if let Some(containers) = &predictor.containers {
        let serving = container::custom_containers(containers, &mut pod, &at)?;
        let upstream =
            pod.containers[serving].ports.as_ref().and_then(|p| p.first()).map_or(SERVER_PORT, |p| p.container_port);
        if revision.component != Component::Predictor {
            container::component_args(&mut pod.containers[serving], revision, upstream, platform);
        }
        pod.containers.push(queue_proxy::queue_proxy(upstream, revision, predictor, platform));
    } else {
        return Err(format!(
            "{at}: neither model nor containers is set (a framework shorthand is expanded into model first)"
        ));
    }
    security::harden(&mut pod).map_err(|e| format!("{at}.{e}"))?;
    Ok(pod)
}

/// A k8s type from the named fields of a map of extra fields; the error names the field.
pub(super) fn from_fields<T: serde::de::DeserializeOwned + Default>(
    other: &BTreeMap<String, Value>,
    fields: &[&str],
    at: &str,
) -> Result<T, String> {
    let picked: Map<String, Value> =
        other.iter().filter(|(k, _)| fields.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    if picked.is_empty() {
        return Ok(T::default());
    }
    serde_path_to_error::deserialize(Value::Object(picked)).map_err(|e| format!("{at}.{}: {}", e.path(), e.inner()))
}

mod collocation;
mod container;
mod queue_proxy;
mod revision;
mod runtime;
mod security;
mod server;
mod storage;
#[cfg(test)]
mod testing;

pub use storage::STORAGE_INITIALIZER;

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;
    use crate::desired::testing::*;

    #[test]
    fn what_cannot_be_served_is_refused_with_the_field_named() {
        let sklearn = build(&MODEL.replace("name: onnx", "name: sklearn")).unwrap_err();
        assert!(sklearn.starts_with("spec.predictor.model.modelFormat.name: skiff-server serves onnx"), "{sklearn}");
        let relative = build(&MODEL.replace("file:///models/iris", "file://./iris")).unwrap_err();
        assert!(relative.starts_with("spec.predictor.model.storageUri:"), "{relative}");
        let unexpanded = build("    sklearn: {storageUri: 'gs://x'}\n").unwrap_err();
        assert!(unexpanded.starts_with("spec.predictor: neither model nor containers"), "{unexpanded}");
        let bad_container = build("    containers:\n    - image: 5\n      ports: nope\n").unwrap_err();
        assert!(bad_container.starts_with("spec.predictor.containers[0]:"), "{bad_container}");
    }

    #[test]
    fn the_components_labels_annotations_and_strategy_reach_the_deployment() {
        let extended = format!(
            "    labels: {{team: fraud, component: mine}}\n    annotations: {{sidecar.io/inject: 'false'}}\n    \
             deploymentStrategy: {{type: RollingUpdate, rollingUpdate: {{maxSurge: 0, maxUnavailable: 1}}}}\n{MODEL}"
        );
        let d = build(&extended).unwrap();
        let spec = d.spec.as_ref().unwrap();
        let meta = spec.template.metadata.as_ref().unwrap();
        let labels = meta.labels.as_ref().unwrap();
        assert_eq!(labels["team"], "fraud");
        assert_eq!(labels["component"], "predictor", "the revision's own labels win");
        assert_eq!(meta.annotations.as_ref().unwrap()["sidecar.io/inject"], "false");
        let strategy = spec.strategy.as_ref().unwrap();
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
        assert_eq!(strategy.rolling_update.as_ref().unwrap().max_surge, Some(IntOrString::Int(0)));

        let bad = build(&format!("    labels: [a]\n{MODEL}")).unwrap_err();
        assert_eq!(bad, "spec.predictor.labels: invalid type: sequence, expected a map");
    }

    #[test]
    fn the_applied_hash_ignores_replicas_and_follows_the_spec() {
        let one = build(MODEL).unwrap();
        let none =
            deployment(&revision(), &owner(), &predictor(MODEL), &record(), None, &Platform::default(), None).unwrap();
        assert_eq!(applied_hash(&one.metadata), applied_hash(&none.metadata));
        let other = Platform { server_image: "skiff-server:2".into(), ..Platform::default() };
        let moved = deployment(&revision(), &owner(), &predictor(MODEL), &record(), None, &other, None).unwrap();
        assert_ne!(applied_hash(&one.metadata), applied_hash(&moved.metadata));
    }

    #[test]
    fn the_service_maps_port_80_to_the_container() {
        let s = service(&revision(), &owner(), 9000);
        let spec = s.spec.as_ref().unwrap();
        assert_eq!(spec.selector.as_ref().unwrap(), &revision().selector());
        let port = &spec.ports.as_ref().unwrap()[0];
        assert_eq!((port.port, port.target_port.clone()), (80, Some(IntOrString::Int(9000))));
        assert_eq!(s.metadata.labels.as_ref().unwrap()["skiff.dev/revision-name"], "iris-predictor-00002");
        assert!(applied_hash(&s.metadata).is_some());
    }

    #[test]
    fn the_deployment_records_the_scaling_inputs() {
        let scaling = skiff_api::scaling::ScalingInputs { min_replicas: Some(0), ..Default::default() };
        let record = Record { scaling, ..record() };
        let d =
            deployment(&revision(), &owner(), &predictor(MODEL), &record, None, &Platform::default(), None).unwrap();
        let text = &d.metadata.annotations.as_ref().unwrap()["skiff.dev/scaling"];
        let back: skiff_api::scaling::ScalingInputs = serde_json::from_str(text).unwrap();
        assert_eq!(back.min_replicas, Some(0));
    }
}
