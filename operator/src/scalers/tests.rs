use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Value, json};
use skiff_api::autoscaling::Class;

use super::*;

/// A revision Deployment of `iris` as stored, recording `scaling` (its `skiff.dev/scaling` JSON).
fn revision(name: &str, scaling: Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
            "labels": {"serving.kserve.io/inferenceservice": "iris", "component": "predictor"},
            "annotations": {"skiff.dev/scaling": scaling.to_string()}},
        "spec": {"selector": {}, "template": {}},
    }))
    .unwrap()
}

fn class(name: &str) -> Value {
    json!({"serving.kserve.io/autoscalerClass": name})
}

#[test]
fn an_hpa_revision_gets_an_hpa_owned_by_its_deployment() {
    let d = revision(
        "iris-predictor-00001",
        json!({"minReplicas": 0, "maxReplicas": 4, "scaleMetric": "cpu",
        "scaleTarget": 60, "kserve": class("hpa")}),
    );
    let plan = plan(std::slice::from_ref(&d), &[], &[], true);
    assert_eq!(plan.hpas.len(), 1);
    let hpa = serde_json::to_value(&plan.hpas[0]).unwrap();
    assert_eq!(
        hpa["spec"],
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "iris-predictor-00001"},
            "minReplicas": 1, "maxReplicas": 4,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]})
    );
    let owner = &hpa["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["uid"], &owner["controller"]),
        (&json!("Deployment"), &json!("uid-iris-predictor-00001"), &json!(true))
    );
    assert_eq!(hpa["metadata"]["labels"]["serving.kserve.io/inferenceservice"], "iris");
    assert_eq!(hpa["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"], "hpa");

    // Unchanged: nothing to write. A changed spec (another hash): applied again.
    let stored = plan.hpas[0].clone();
    assert_eq!(super::plan(std::slice::from_ref(&d), std::slice::from_ref(&stored), &[], true), ScalerPlan::default());
    let mut older = stored;
    older.metadata.annotations.as_mut().unwrap().insert("skiff.dev/applied-hash".into(), "old".into());
    assert_eq!(super::plan(&[d], &[older], &[], true).hpas.len(), 1);
}

#[test]
fn a_switch_of_class_makes_the_new_object_and_deletes_what_no_revision_wants() {
    let hpa_revision = revision("iris-predictor-00001", json!({"kserve": class("hpa")}));
    let keda_revision = revision(
        "iris-predictor-00002",
        json!({"kserve": class("keda"), "autoScaling": {"metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}),
    );
    let first = plan(std::slice::from_ref(&hpa_revision), &[], &[], true).hpas;
    // Both revisions live (a canary): each keeps its own object.
    let both = plan(&[hpa_revision.clone(), keda_revision.clone()], &first, &[], true);
    assert!(both.hpas.is_empty() && both.delete_hpas.is_empty(), "{both:?}");
    assert_eq!(both.scaled_objects.len(), 1);
    let scaled = serde_json::to_value(&both.scaled_objects[0]).unwrap();
    assert_eq!(scaled["apiVersion"], "keda.sh/v1alpha1");
    assert_eq!(scaled["kind"], "ScaledObject");
    assert_eq!(
        scaled["spec"],
        json!({"scaleTargetRef": {"name": "iris-predictor-00002"}, "minReplicaCount": 1, "maxReplicaCount": 1,
            "triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}}]})
    );
    assert_eq!(scaled["metadata"]["ownerReferences"][0]["name"], "iris-predictor-00002");
    // The hpa revision gone (collected): its HPA goes too, whoever is first (this or the garbage collector).
    let after = plan(std::slice::from_ref(&keda_revision), &first, &both.scaled_objects, true);
    assert_eq!(after.delete_hpas, ["iris-predictor-00001"]);
    assert!(after.scaled_objects.is_empty() && after.delete_scaled_objects.is_empty());
    // Back to the KPA: the ScaledObject goes.
    let kpa = revision("iris-predictor-00003", json!({}));
    assert_eq!(plan(&[kpa], &[], &both.scaled_objects, true).delete_scaled_objects, ["iris-predictor-00002"]);
    // Without KEDA's CRD no ScaledObject is made (the reconcile reports it).
    assert!(plan(&[keda_revision], &[], &[], false).scaled_objects.is_empty());
}

#[test]
fn external_none_and_kpa_make_nothing_and_only_hpa_or_keda_services_read_their_kinds() {
    for name in ["external", "none", "kpa"] {
        let d = revision("iris-predictor-00001", json!({"kserve": class(name)}));
        assert_eq!(plan(&[d], &[], &[], true), ScalerPlan::default(), "{name}");
    }
    let manifest = |annotations: &str| {
        skiff_api::InferenceService::from_yaml(&format!(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\n  annotations: {{{annotations}}}\nspec:\n  predictor:\n    model: {{modelFormat: {{name: onnx}}, storageUri: file:///m}}\n"
        ))
        .unwrap()
    };
    assert_eq!(needs(&manifest(""), &[]), Needs::default(), "a KPA service reads nothing more");
    let hpa = needs(&manifest("serving.kserve.io/deploymentMode: Standard"), &[]);
    assert_eq!(hpa, Needs { hpa: true, keda: false, keda_wanted: false });
    let keda = needs(&manifest("serving.kserve.io/autoscalerClass: keda"), &[]);
    assert_eq!(keda, Needs { hpa: false, keda: true, keda_wanted: true });
    let old = revision("iris-predictor-00001", json!({"kserve": class("hpa")}));
    assert!(needs(&manifest(""), &[old]).hpa, "an older revision's HPA is still looked after");
    assert_eq!(ScalingInputs::from_annotations(&Default::default()).class(), Class::Kpa);
}
