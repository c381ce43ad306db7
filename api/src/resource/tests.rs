use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::fields::{Child, Level};

const IRIS: &str = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\n  namespace: ml\n  annotations:\n    autoscaling.knative.dev/target: \"5\"\nspec:\n  predictor:\n    serviceAccountName: reader\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n";

fn schema() -> Value {
    serde_json::to_value(crd().spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap()
}

#[test]
fn the_checked_in_crd_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let generated = crd_yaml().unwrap();
    for file in [CRD_PATH, "deploy/helm/skiff/crds/serving.kserve.io_inferenceservices.yaml"] {
        let checked_in = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{file} is stale: regenerate it with `cargo run -q -p skiff-api --bin crdgen > {file}` \
             (from the repository root) and commit the result"
        );
    }
}

#[test]
fn names_scope_subresources_and_columns_are_kserves() {
    let crd = crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("inferenceservices.serving.kserve.io"));
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names, Some(vec!["isvc".to_owned()]));
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1beta1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<(String, String)> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .filter(|c| c.priority.is_none())
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["URL", "Ready", "Prev", "Latest", "Age"]);
    assert_eq!(columns[1].1, r#".status.conditions[?(@.type=="Ready")].status"#);
    assert_eq!(columns[3].1, ".status.components.predictor.traffic[?(@.latestRevision==true)].percent");
}

/// A place in a schema that [`Level::child`] reaches from `spec` (a list's items for a list): its
/// path, level, field names, and whether it keeps unknown fields.
struct Place {
    at: String,
    level: Level,
    names: BTreeSet<String>,
    preserves: bool,
}

fn places(schema: &Value, level: Level, at: &str, out: &mut Vec<Place>) {
    let properties = schema["properties"].as_object().cloned().unwrap_or_default();
    let preserves = schema.get("x-kubernetes-preserve-unknown-fields").is_some();
    out.push(Place { at: at.to_owned(), level, names: properties.keys().cloned().collect(), preserves });
    for (field, property) in &properties {
        let at = format!("{at}.{field}");
        match level.child(field) {
            Some(Child::Object(child)) => places(property, child, &at, out),
            Some(Child::List(child)) => places(&property["items"], child, &format!("{at}[]"), out),
            None => {}
        }
    }
}

fn fields(level: Level) -> BTreeSet<String> {
    level.fields().into_iter().map(str::to_owned).collect()
}

/// KServe's own InferenceService CRD (v1beta1), from the corpus fixture.
fn kserve_schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/kserve-corpus/kserve-inferenceservices-crd.yaml.gz");
    let mut yaml = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()).read_to_string(&mut yaml).unwrap();
    let options = serde_saphyr::options! { budget: None };
    let crd: Value = serde_saphyr::from_str_with_options(&yaml, options).unwrap();
    let version = crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == "v1beta1").unwrap();
    version["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn the_schema_declares_kserves_fields_and_keeps_no_unknown_one_where_kserves_does_not() {
    // Every level's names are KServe's: the union, over the places of that level in KServe's CRD,
    // of what it declares there (a component's: the predictor's and the explainer's together).
    let kserve = kserve_schema();
    let mut theirs = Vec::new();
    places(&kserve["properties"]["spec"], Level::Spec, "spec", &mut theirs);
    let mut union: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for place in &theirs {
        assert!(!place.preserves, "KServe's CRD keeps unknown fields at {}", place.at);
        union.entry(format!("{:?}", place.level)).or_default().extend(place.names.iter().cloned());
    }
    union.insert("Root".to_owned(), kserve["properties"].as_object().unwrap().keys().cloned().collect());
    // (`metadata` is Kubernetes' ObjectMeta, which a CRD does not declare.)
    for level in Level::ALL.into_iter().filter(|l| *l != Level::Metadata) {
        assert_eq!(union.get(&format!("{level:?}")), Some(&fields(level)), "{level:?}");
    }

    // Skiff's CRD declares exactly those names at every such place, and keeps no unknown field there.
    let mut ours = Vec::new();
    places(&schema()["properties"]["spec"], Level::Spec, "spec", &mut ours);
    for place in &ours {
        assert!(!place.preserves, "Skiff's CRD keeps unknown fields at {}", place.at);
        assert_eq!(place.names, fields(place.level), "{}", place.at);
    }
    let reached: BTreeSet<String> = ours.iter().map(|p| format!("{:?}", p.level)).collect();
    assert_eq!(reached.len(), Level::ALL.len() - 2, "every level below spec is reached: {reached:?}");
    // Below them, values are kept as written: what a user gives a pod passes through.
    let predictor = &schema()["properties"]["spec"]["properties"]["predictor"]["properties"];
    assert_eq!(predictor["nodeSelector"], json!({"x-kubernetes-preserve-unknown-fields": true}));
    let resources = &predictor["containers"]["items"]["properties"]["resources"];
    assert_eq!(resources["x-kubernetes-preserve-unknown-fields"], json!(true));
}

#[test]
fn bounds_and_rules_are_in_the_schema() {
    let schema = schema();
    let predictor = &schema["properties"]["spec"]["properties"]["predictor"];
    let p = &predictor["properties"];
    assert_eq!(p["minReplicas"]["minimum"], json!(0.0));
    assert_eq!(p["maxReplicas"]["minimum"], json!(0.0));
    assert_eq!(p["containerConcurrency"]["minimum"], json!(0.0));
    assert_eq!(
        (&p["canaryTrafficPercent"]["minimum"], &p["canaryTrafficPercent"]["maximum"]),
        (&json!(0.0), &json!(100.0))
    );
    let rules = predictor["x-kubernetes-validations"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["fieldPath"] == ".minReplicas"));
    let model = &p["model"];
    // modelFormat and storageUri are optional, as in KServe's CRD (validation asks for them where
    // Skiff needs them); a format given must name itself.
    assert_eq!(model["required"], Value::Null);
    assert_eq!(model["properties"]["modelFormat"]["required"], json!(["name"]));
    assert_eq!(model["x-kubernetes-validations"], Value::Null);
    assert_eq!(p["scaleMetric"]["enum"], json!(["concurrency", "rps", "cpu", "memory"]), "KServe's four");
}

#[test]
fn the_maxima_are_in_the_schema() {
    let schema = schema();
    let p = &schema["properties"]["spec"]["properties"]["predictor"]["properties"];
    for (field, min, max) in [
        ("minReplicas", 0.0, 1000.0),
        ("maxReplicas", 0.0, 1000.0),
        ("containerConcurrency", 0.0, 1000.0),
        ("timeout", 1.0, 3600.0),
        ("scaleTarget", 1.0, 100_000.0),
    ] {
        assert_eq!((&p[field]["minimum"], &p[field]["maximum"]), (&json!(min), &json!(max)), "{field}");
    }
}

#[test]
fn the_root_rules_bound_the_name_for_its_revision_names() {
    let schema = schema();
    assert_eq!(schema["properties"]["metadata"], json!({"type": "object", "properties": {"name": {"type": "string"}}}));
    let rules = schema["x-kubernetes-validations"].as_array().unwrap();
    assert_eq!(rules[0]["rule"], "self.metadata.name.size() <= 47");
    assert_eq!(
        rules[0]["message"],
        "metadata.name is too long; the limit is 47 characters, so that revision names (<name>-predictor-00001) fit in 63"
    );
    assert!(rules[1]["rule"].as_str().unwrap().contains("matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"));
    assert!(rules.iter().all(|r| r["fieldPath"] == ".metadata.name" && r["reason"] == "FieldValueInvalid"));
}

#[test]
fn manifest_and_resource_convert_both_ways() {
    let manifest = InferenceService::from_yaml(IRIS).unwrap();
    let resource = InferenceServiceResource::from(&manifest);
    assert_eq!(resource.metadata.namespace.as_deref(), Some("ml"));
    let json = serde_json::to_value(&resource).unwrap();
    assert_eq!(json["apiVersion"], "serving.kserve.io/v1beta1");
    assert_eq!(json["kind"], "InferenceService");
    assert_eq!(json["spec"]["predictor"]["serviceAccountName"], "reader");
    assert_eq!(resource.to_manifest(), manifest);
}
