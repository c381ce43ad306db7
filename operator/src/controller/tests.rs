use serde_json::Value;

use super::*;
use crate::fixtures::calls::{
    apply_deployment, apply_service, get_account, get_secret, list_children, list_runtimes, route_deployment,
    write_status,
};
use crate::fixtures::{ApiServer, Call, context, inference_service};

const ONNX: &str = "  predictor:\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";
const FIRST: &str = "iris-predictor-00001";
const SECOND: &str = "iris-predictor-00002";

/// One reconcile of the InferenceService `server` holds, against it, the calls following `script`.
async fn reconcile_on(server: ApiServer, script: &[Vec<Call>]) -> (Result<Action>, ApiServer) {
    let (ctx, handle) = context();
    let isvc = Arc::new(server.isvc.clone());
    let (server, result) = tokio::join!(server.serve(handle, script), reconcile(isvc, ctx));
    (result, server)
}

/// The InferenceService `iris` on an ONNX model, reconciled once: its first revision applied.
async fn created() -> ApiServer {
    let server = ApiServer::new(inference_service("iris", ONNX));
    let script = [list_children(), vec![apply_deployment(FIRST), apply_service(FIRST)], vec![write_status()]];
    let (result, server) = reconcile_on(server, &script).await;
    assert_eq!(result.unwrap(), Action::requeue(NOT_READY_RECHECK), "not Ready: looked at again soon");
    server
}

#[tokio::test]
async fn a_downloaded_model_gets_the_credentials_its_service_account_lists_and_nothing_else_reads_them() {
    let spec = "  predictor:\n    serviceAccountName: reader\n    model:\n      modelFormat: {name: onnx}\n      storageUri: s3://models/iris\n";
    let mut server = ApiServer::new(inference_service("iris", spec));
    server.accounts.push(
        serde_json::from_value(json!({"metadata": {"name": "reader", "namespace": "ml"},
            "secrets": [{"name": "gone"}, {"name": "minio"}]}))
        .unwrap(),
    );
    server.secrets.push(
        serde_json::from_value(json!({"metadata": {"name": "minio", "namespace": "ml",
            "annotations": {"serving.kserve.io/s3-endpoint": "10.0.0.5:9000", "serving.kserve.io/s3-usehttps": "0"}},
            "data": {"AWS_ACCESS_KEY_ID": "aWQ=", "AWS_SECRET_ACCESS_KEY": "c2VjcmV0LXZhbHVl"}}))
        .unwrap(),
    );
    let script = [
        list_children(),
        vec![get_account("reader")],
        vec![get_secret("gone")],
        vec![get_secret("minio")],
        vec![apply_deployment(FIRST), apply_service(FIRST)],
        vec![write_status()],
    ];
    let (result, server) = reconcile_on(server, &script).await;
    result.unwrap();
    let deployment = server.body(&apply_deployment(FIRST));
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "reader");
    let env = &pod["initContainers"][0]["env"];
    let named = |name: &str| env.as_array().unwrap().iter().find(|e| e["name"] == name).cloned();
    assert_eq!(
        named("AWS_SECRET_ACCESS_KEY"),
        Some(
            json!({"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "minio", "key": "AWS_SECRET_ACCESS_KEY"}}})
        )
    );
    assert_eq!(named("AWS_ENDPOINT_URL"), Some(json!({"name": "AWS_ENDPOINT_URL", "value": "http://10.0.0.5:9000"})));
    assert_eq!(
        pod["initContainers"][0]["args"][3], "http://skiff-model-cache.skiff-node.svc.cluster.local:8095",
        "the node cache's address stays"
    );
    assert!(!deployment.to_string().contains("c2VjcmV0LXZhbHVl"), "no secret value in the Deployment");
    assert!(pod["containers"][0].get("env").is_none_or(|e| !e.to_string().contains("AWS_")), "{pod}");

    // A model from the node's disk reads no ServiceAccount.
    let spec = "  predictor:\n    serviceAccountName: reader\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";
    let server = ApiServer::new(inference_service("iris", spec));
    let script = [list_children(), vec![apply_deployment(FIRST), apply_service(FIRST)], vec![write_status()]];
    reconcile_on(server, &script).await.0.unwrap();
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    let conditions = status["conditions"].as_array().expect("conditions");
    conditions.iter().find(|c| c["type"] == type_).unwrap_or_else(|| panic!("no {type_} in {status}"))
}

/// The revisions a component's status gives all its traffic.
fn serving(component: &Value) -> Vec<&str> {
    let traffic = component["traffic"].as_array().expect("traffic");
    traffic.iter().filter(|t| t["percent"] == 100).map(|t| t["revisionName"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_new_inference_service_gets_its_children_then_its_status() {
    let server = created().await;
    let deployment = server.body(&apply_deployment(FIRST));
    assert_eq!(deployment["metadata"]["ownerReferences"][0]["uid"], "uid-iris");
    assert_eq!(deployment["spec"]["replicas"], 1, "the initial scale");
    assert!(deployment["metadata"]["annotations"]["skiff.dev/applied-hash"].is_string());
    let service = server.body(&apply_service(FIRST));
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
    let written = server.body(&write_status());
    assert_eq!(written["metadata"]["resourceVersion"], "1", "written on the version read");
    let status = &written["status"];
    assert_eq!(status["components"]["predictor"]["latestCreatedRevision"], FIRST);
    assert_eq!(condition(status, "Ready")["status"], "False");
    assert_eq!(condition(status, "Ready")["reason"], "RevisionNotReady");
    assert_eq!(server.deployments.len(), 1);
    assert_eq!(server.isvc.status.as_ref().map(|s| serde_json::to_value(s).unwrap()), Some(status.clone()));
    assert_ne!(server.isvc.resource_version().as_deref(), Some("1"), "stored: a version on");
}

#[tokio::test]
async fn an_unchanged_inference_service_is_read_and_nothing_is_written() {
    let server = created().await;
    // What the API server holds now (with the fields it defaults) hashes as applied: no apply.
    let (result, server) = reconcile_on(server, &[list_children()]).await;
    assert_eq!(result.unwrap(), Action::requeue(NOT_READY_RECHECK));

    let mut server = server;
    server.make_available(FIRST);
    let (result, server) = reconcile_on(server, &[list_children(), vec![write_status()]]).await;
    assert_eq!(result.unwrap(), Action::requeue(RESYNC), "Ready: the periodic re-check only");
    let status = &server.body(&write_status())["status"];
    assert_eq!(condition(status, "Ready")["status"], "True");
    assert_eq!(status["components"]["predictor"]["latestRolledoutRevision"], FIRST);

    let (result, _) = reconcile_on(server, &[list_children()]).await;
    assert_eq!(result.unwrap(), Action::requeue(RESYNC), "no child applied, the status as stored");
}

#[tokio::test]
async fn an_invalid_inference_service_gets_only_a_status_naming_the_field() {
    let bad = ONNX.replace("file:///models/iris", "file://./iris");
    let server = ApiServer::new(inference_service("iris", &bad));
    let (result, server) = reconcile_on(server, &[list_children(), vec![write_status()]]).await;
    let Err(Error::Spec(why)) = result else { panic!("refused as a spec: {result:?}") };
    assert!(why.contains("spec.predictor.model.storageUri"), "{why}");
    let ready = condition(&server.body(&write_status())["status"], "Ready").clone();
    assert_eq!((&ready["status"], &ready["reason"]), (&"False".into(), &"InvalidSpec".into()));
    assert_eq!(ready["message"], why.as_str());
    assert!(server.deployments.is_empty() && server.services.is_empty(), "no children");
}

#[tokio::test]
async fn a_model_for_a_runtime_reads_the_runtimes_after_the_children_and_says_when_none_serves_it() {
    let sklearn = ONNX.replace("name: onnx", "name: sklearn");
    let server = ApiServer::new(inference_service("iris", &sklearn));
    // Neither runtime CRD installed: both lists answer 404, read as no runtime.
    let script = [list_children(), list_runtimes(), vec![write_status()]];
    let (result, server) = reconcile_on(server, &script).await;
    let Err(Error::Spec(why)) = result else { panic!("refused as a spec: {result:?}") };
    let ready = condition(&server.body(&write_status())["status"], "Ready").clone();
    assert_eq!(ready["reason"], "NoSupportingRuntime", "{why}");
    assert!(server.deployments.is_empty(), "no children");
}

#[tokio::test]
async fn a_rollout_applies_the_new_revision_then_moves_traffic_then_keeps_the_old_one_at_zero() {
    let mut server = created().await;
    server.make_available(FIRST);
    let (result, mut server) = reconcile_on(server, &[list_children(), vec![write_status()]]).await;
    result.unwrap();

    let mut isvc = inference_service("iris", &ONNX.replace("/models/iris", "/models/iris-v2"));
    isvc.metadata.generation = Some(2);
    isvc.metadata.resource_version = server.isvc.metadata.resource_version.clone();
    isvc.status = server.isvc.status.clone();
    server.isvc = isvc;
    let script = [list_children(), vec![apply_deployment(SECOND), apply_service(SECOND)], vec![write_status()]];
    let (result, mut server) = reconcile_on(server, &script).await;
    assert_eq!(result.unwrap(), Action::requeue(RESYNC), "still Ready on the first revision");
    let predictor = &server.body(&write_status())["status"]["components"]["predictor"];
    assert_eq!(predictor["latestCreatedRevision"], SECOND);
    assert_eq!(serving(predictor), [FIRST], "traffic stays until the new one is ready: {predictor}");

    server.make_available(SECOND);
    let script = [list_children(), vec![write_status()], vec![route_deployment(FIRST)]];
    let (result, server) = reconcile_on(server, &script).await;
    assert_eq!(result.unwrap(), Action::requeue(RESYNC));
    let predictor = &server.body(&write_status())["status"]["components"]["predictor"];
    assert_eq!(serving(predictor), [SECOND], "{predictor}");
    let route = server.body(&route_deployment(FIRST));
    assert_eq!(
        (&route["metadata"]["labels"]["skiff.dev/routing-state"], &route["spec"]),
        (&json!("reserve"), &json!({"replicas": 0})),
        "the old revision kept at zero after the status moved its traffic: {route}"
    );
    let left: Vec<String> = server.deployments.iter().map(ResourceExt::name_any).collect();
    assert_eq!(left, [FIRST, SECOND]);
    assert_eq!(server.services.iter().map(ResourceExt::name_any).collect::<Vec<_>>(), [FIRST, SECOND]);

    let (result, _) = reconcile_on(server, &[list_children()]).await;
    assert_eq!(result.unwrap(), Action::requeue(RESYNC), "then nothing more is written");
}

#[test]
fn a_revision_without_traffic_is_collected_after_the_retention_period() {
    let retiring = Retiring::default();
    let candidates = vec!["r-00001".to_owned()];
    let (due, next) = retiring.due("uid", &candidates, Duration::from_secs(30));
    assert!(due.is_empty(), "kept at first");
    assert!(next.is_some_and(|n| n > Duration::from_secs(29)));
    let (due, next) = retiring.due("uid", &candidates, Duration::ZERO);
    assert_eq!((due, next), (candidates.clone(), None), "collected once the period is over");
    let (due, _) = retiring.due("uid", &candidates, Duration::from_secs(30));
    assert!(due.is_empty(), "a collected revision starts over if it shows up again");
    let (due, _) = retiring.due("uid", &[], Duration::ZERO);
    assert!(due.is_empty());
    assert!(retiring.0.lock().unwrap().is_empty(), "a revision that took traffic again is forgotten");
}
