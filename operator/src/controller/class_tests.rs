//! Reconciles of InferenceServices of each autoscaler class against the mocked API server: the
//! HPA or ScaledObject of each revision, KEDA's CRD missing, classes that make nothing, a switch.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::*;
use crate::fixtures::calls::{
    apply_deployment, apply_hpa, apply_scaled_object, apply_service, delete_hpa, list_children, list_hpas,
    list_scaled_objects, route_deployment, write_status,
};
use crate::fixtures::{ApiServer, Call, context, inference_service};

const FIRST: &str = "iris-predictor-00001";
const SECOND: &str = "iris-predictor-00002";
const CPU: &str = "  predictor:\n    minReplicas: 0\n    maxReplicas: 4\n    scaleMetric: cpu\n    scaleTarget: 60\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";
const KEDA: &str = "  predictor:\n    maxReplicas: 3\n    autoScaling:\n      metrics:\n      - type: Resource\n        resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";

/// `iris` with `spec` and `annotations`.
fn service(spec: &str, annotations: &[(&str, &str)]) -> InferenceServiceResource {
    let mut isvc = inference_service("iris", spec);
    let annotations: BTreeMap<String, String> =
        annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    isvc.metadata.annotations = Some(annotations);
    isvc
}

async fn reconcile_on(server: ApiServer, script: &[Vec<Call>]) -> (Result<Action>, ApiServer) {
    let (ctx, handle) = context();
    let isvc = Arc::new(server.isvc.clone());
    let (server, result) = tokio::join!(server.serve(handle, script), reconcile(isvc, ctx));
    (result, server)
}

fn ready_condition(server: &ApiServer) -> Value {
    let status = serde_json::to_value(server.isvc.status.as_ref().expect("a status")).unwrap();
    status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned().expect("Ready")
}

/// The InferenceService on the mocked server replaced by `isvc` (a new generation of it).
fn change(server: &mut ApiServer, mut isvc: InferenceServiceResource) {
    isvc.metadata.generation = Some(2);
    isvc.metadata.resource_version = server.isvc.metadata.resource_version.clone();
    isvc.status = server.isvc.status.clone();
    server.isvc = isvc;
}

#[tokio::test]
async fn an_hpa_class_revision_gets_its_hpa_after_its_deployment_and_once() {
    let isvc = service(CPU, &[("serving.kserve.io/deploymentMode", "Standard")]);
    let script = [
        list_children(),
        vec![list_hpas()],
        vec![apply_deployment(FIRST), apply_service(FIRST)],
        vec![apply_hpa(FIRST)],
        vec![write_status()],
    ];
    let (result, server) = reconcile_on(ApiServer::new(isvc), &script).await;
    result.unwrap();
    let hpa = server.body(&apply_hpa(FIRST));
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(hpa["metadata"]["ownerReferences"][0]["uid"], "uid-iris-predictor-00001", "owned by the revision");
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], FIRST);
    assert_eq!((&hpa["spec"]["minReplicas"], &hpa["spec"]["maxReplicas"]), (&json!(1), &json!(4)));
    assert_eq!(hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 60);
    let deployment = server.body(&apply_deployment(FIRST));
    assert_eq!(deployment["spec"]["replicas"], 1, "created with one replica; the HPA decides on");
    let recorded: Value =
        serde_json::from_str(deployment["metadata"]["annotations"]["skiff.dev/scaling"].as_str().unwrap()).unwrap();
    assert_eq!(recorded["kserve"]["serving.kserve.io/deploymentMode"], "Standard", "the class is recorded: {recorded}");

    // Nothing changed: read, nothing written.
    let (result, _) = reconcile_on(server, &[list_children(), vec![list_hpas()]]).await;
    result.unwrap();
}

#[tokio::test]
async fn keda_without_its_crd_is_refused_naming_it_and_with_it_gets_a_scaled_object() {
    let isvc = service(KEDA, &[("serving.kserve.io/autoscalerClass", "keda")]);
    let (result, server) = reconcile_on(
        ApiServer::new(isvc.clone()),
        &[list_children(), vec![list_scaled_objects()], vec![write_status()]],
    )
    .await;
    let Err(Error::Spec(why)) = result else { panic!("refused: {result:?}") };
    assert!(why.contains("scaledobjects.keda.sh"), "{why}");
    let ready = ready_condition(&server);
    assert_eq!((&ready["status"], &ready["reason"]), (&json!("False"), &json!(KEDA_NOT_INSTALLED)));
    assert!(server.deployments.is_empty(), "nothing made");

    let mut server = ApiServer::new(isvc);
    server.keda = true;
    let script = [
        list_children(),
        vec![list_scaled_objects()],
        vec![apply_deployment(FIRST), apply_service(FIRST)],
        vec![apply_scaled_object(FIRST)],
        vec![write_status()],
    ];
    let (result, server) = reconcile_on(server, &script).await;
    result.unwrap();
    let scaled = server.body(&apply_scaled_object(FIRST));
    assert_eq!((&scaled["apiVersion"], &scaled["kind"]), (&json!("keda.sh/v1alpha1"), &json!("ScaledObject")));
    assert_eq!(scaled["metadata"]["ownerReferences"][0]["uid"], "uid-iris-predictor-00001");
    assert_eq!(
        scaled["spec"],
        json!({"scaleTargetRef": {"name": FIRST}, "minReplicaCount": 1, "maxReplicaCount": 3,
            "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}}]})
    );
}

#[tokio::test]
async fn external_and_none_make_no_autoscaler_object() {
    for (class, replicas) in [("external", 2), ("none", 2)] {
        let spec = "  predictor:\n    minReplicas: 2\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";
        let isvc = service(spec, &[("serving.kserve.io/autoscalerClass", class)]);
        let script = [list_children(), vec![apply_deployment(FIRST), apply_service(FIRST)], vec![write_status()]];
        let (result, server) = reconcile_on(ApiServer::new(isvc), &script).await;
        result.unwrap();
        let deployment = server.body(&apply_deployment(FIRST));
        assert_eq!(deployment["spec"]["replicas"], replicas, "{class}: created with minReplicas");
        assert!(server.hpas.is_empty() && server.scaled_objects.is_empty(), "{class}");
    }
}

#[tokio::test]
async fn a_switch_of_class_rolls_a_revision_with_its_object_and_the_old_one_at_zero_loses_its_own() {
    let mut server = ApiServer::new(service(CPU, &[("serving.kserve.io/autoscalerClass", "hpa")]));
    server.keda = true;
    let script = [
        list_children(),
        vec![list_hpas()],
        vec![apply_deployment(FIRST), apply_service(FIRST)],
        vec![apply_hpa(FIRST)],
        vec![write_status()],
    ];
    let (result, mut server) = reconcile_on(server, &script).await;
    result.unwrap();
    server.make_available(FIRST);
    let (result, mut server) = reconcile_on(server, &[list_children(), vec![list_hpas()], vec![write_status()]]).await;
    result.unwrap();

    change(&mut server, service(KEDA, &[("serving.kserve.io/autoscalerClass", "keda")]));
    let script = [
        list_children(),
        vec![list_hpas(), list_scaled_objects()],
        vec![apply_deployment(SECOND), apply_service(SECOND)],
        vec![apply_scaled_object(SECOND)],
        vec![write_status()],
    ];
    let (result, mut server) = reconcile_on(server, &script).await;
    result.unwrap();
    assert_eq!(server.hpas.iter().map(ResourceExt::name_any).collect::<Vec<_>>(), [FIRST], "kept while it serves");

    server.make_available(SECOND);
    let script = [
        list_children(),
        vec![list_hpas(), list_scaled_objects()],
        vec![write_status()],
        vec![route_deployment(FIRST)],
    ];
    let (result, server) = reconcile_on(server, &script).await;
    result.unwrap();
    let script = [list_children(), vec![list_hpas(), list_scaled_objects()], vec![delete_hpa(FIRST)]];
    let (result, server) = reconcile_on(server, &script).await;
    result.unwrap();
    assert_eq!(server.deployments.iter().map(ResourceExt::name_any).collect::<Vec<_>>(), [FIRST, SECOND]);
    assert!(server.hpas.is_empty(), "the old revision, kept at zero, has no HPA to scale it up");
    assert_eq!(server.scaled_objects.iter().map(ResourceExt::name_any).collect::<Vec<_>>(), [SECOND]);
}
