use std::path::Path;

use serde_json::{Value, json};

use super::*;

fn model(value: Value) -> ModelSpec {
    serde_json::from_value(value).unwrap()
}

fn sklearn() -> ModelSpec {
    model(json!({"modelFormat": {"name": "sklearn"}, "storageUri": "gs://models/iris"}))
}

/// A format entry: name, version, autoSelect, priority.
fn format(name: &str, version: Option<&str>, auto_select: bool, priority: Option<i32>) -> Value {
    let mut f = json!({"name": name, "autoSelect": auto_select});
    if let Some(v) = version {
        f["version"] = json!(v);
    }
    if let Some(p) = priority {
        f["priority"] = json!(p);
    }
    f
}

fn spec(formats: Vec<Value>) -> Value {
    json!({
        "supportedModelFormats": formats,
        "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:v0.15.0"}],
    })
}

fn with(mut spec: Value, key: &str, value: Value) -> Value {
    spec[key] = value;
    spec
}

fn ns(name: &str, spec: Value) -> ServingRuntime {
    serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": "ServingRuntime",
        "metadata": {"name": name, "namespace": "ml"}, "spec": spec,
    }))
    .unwrap()
}

fn cl(name: &str, spec: Value) -> ClusterServingRuntime {
    serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": "ClusterServingRuntime", "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn created(mut runtime: ClusterServingRuntime, at: &str) -> ClusterServingRuntime {
    runtime.metadata.creation_timestamp = Some(serde_json::from_value(json!(at)).unwrap());
    runtime
}

fn auto(name: &str) -> Value {
    spec(vec![format(name, None, true, None)])
}

fn variant(e: &Error) -> &'static str {
    match e {
        Error::RuntimeNotFound { .. } => "RuntimeNotFound",
        Error::RuntimeDisabled { .. } => "RuntimeDisabled",
        Error::RuntimeProtocolUnsupported { .. } => "RuntimeProtocolUnsupported",
        Error::RuntimeFormatUnsupported { .. } => "RuntimeFormatUnsupported",
        Error::NoSupportingRuntime { .. } => "NoSupportingRuntime",
        _ => "other",
    }
}

use RuntimeKind::{Cluster, Namespaced};

struct Case {
    what: &'static str,
    model: ModelSpec,
    namespaced: Vec<ServingRuntime>,
    cluster: Vec<ClusterServingRuntime>,
    want: std::result::Result<(&'static str, RuntimeKind), &'static str>,
}

fn check(cases: Vec<Case>) {
    for c in cases {
        let got = select_runtime(&c.model, &c.namespaced, &c.cluster);
        let got = got.as_ref().map(|s| (s.name, s.kind)).map_err(variant);
        assert_eq!(got, c.want, "{}", c.what);
    }
}

#[test]
fn auto_selection_follows_kserves_rules() {
    let m = sklearn;
    check(vec![
        Case {
            what: "one cluster runtime with autoSelect",
            model: m(),
            namespaced: vec![],
            cluster: vec![cl("kserve-sklearnserver", auto("sklearn"))],
            want: Ok(("kserve-sklearnserver", Cluster)),
        },
        Case {
            what: "a namespace runtime wins over a cluster runtime, even one of higher priority",
            model: m(),
            namespaced: vec![ns("mine", spec(vec![format("sklearn", None, true, Some(1))]))],
            cluster: vec![cl("theirs", spec(vec![format("sklearn", None, true, Some(10))]))],
            want: Ok(("mine", Namespaced)),
        },
        Case {
            what: "the higher priority wins within a scope",
            model: m(),
            namespaced: vec![],
            cluster: vec![
                cl("low", spec(vec![format("sklearn", None, true, Some(1))])),
                cl("high", spec(vec![format("sklearn", None, true, Some(2))])),
            ],
            want: Ok(("high", Cluster)),
        },
        Case {
            what: "a runtime that gives a priority wins over one that gives none",
            model: m(),
            namespaced: vec![
                ns("a-none", auto("sklearn")),
                ns("b-some", spec(vec![format("sklearn", None, true, Some(1))])),
            ],
            cluster: vec![],
            want: Ok(("b-some", Namespaced)),
        },
        Case {
            what: "the priority is the one of the model's format",
            model: m(),
            namespaced: vec![],
            cluster: vec![
                cl("a", spec(vec![format("xgboost", None, true, Some(9)), format("sklearn", None, true, Some(1))])),
                cl("b", spec(vec![format("sklearn", None, true, Some(2))])),
            ],
            want: Ok(("b", Cluster)),
        },
        Case {
            what: "autoSelect false or absent is not auto-selected",
            model: m(),
            namespaced: vec![ns("off", spec(vec![format("sklearn", None, false, Some(5))]))],
            cluster: vec![cl("absent", spec(vec![json!({"name": "sklearn"})]))],
            want: Err("NoSupportingRuntime"),
        },
        Case {
            what: "a disabled runtime is skipped",
            model: m(),
            namespaced: vec![ns("disabled", with(auto("sklearn"), "disabled", json!(true)))],
            cluster: vec![cl("enabled", auto("sklearn"))],
            want: Ok(("enabled", Cluster)),
        },
        Case {
            what: "a multi-model (ModelMesh) runtime is skipped",
            model: m(),
            namespaced: vec![ns("mm", with(auto("sklearn"), "multiModel", json!(true)))],
            cluster: vec![cl("single", with(auto("sklearn"), "multiModel", json!(false)))],
            want: Ok(("single", Cluster)),
        },
        Case {
            what: "format names are compared without regard to case",
            model: model(json!({"modelFormat": {"name": "SKLearn"}})),
            namespaced: vec![],
            cluster: vec![cl("x", auto("sklearn"))],
            want: Ok(("x", Cluster)),
        },
        Case {
            what: "no runtime for the format",
            model: model(json!({"modelFormat": {"name": "pmml"}})),
            namespaced: vec![ns("s", auto("sklearn"))],
            cluster: vec![cl("x", auto("xgboost"))],
            want: Err("NoSupportingRuntime"),
        },
        Case {
            what: "no runtimes at all",
            model: m(),
            namespaced: vec![],
            cluster: vec![],
            want: Err("NoSupportingRuntime"),
        },
    ]);
}

#[test]
fn versions_must_match_when_the_model_gives_one() {
    let v = |version: &str| model(json!({"modelFormat": {"name": "sklearn", "version": version}}));
    let versioned = |name: &str, version: &str| cl(name, spec(vec![format("sklearn", Some(version), true, None)]));
    check(vec![
        Case {
            what: "the same version",
            model: v("1"),
            namespaced: vec![],
            cluster: vec![versioned("v0", "0"), versioned("v1", "1")],
            want: Ok(("v1", Cluster)),
        },
        Case {
            what: "a runtime that gives no version does not serve a versioned model",
            model: v("1"),
            namespaced: vec![],
            cluster: vec![cl("any", auto("sklearn"))],
            want: Err("NoSupportingRuntime"),
        },
        Case {
            what: "versions are compared exactly (1 is not 1.0)",
            model: v("1"),
            namespaced: vec![],
            cluster: vec![versioned("one-zero", "1.0")],
            want: Err("NoSupportingRuntime"),
        },
        Case {
            what: "a model without a version takes any version",
            model: sklearn(),
            namespaced: vec![],
            cluster: vec![versioned("v1", "1")],
            want: Ok(("v1", Cluster)),
        },
        Case {
            what: "one of several entries of the same format",
            model: v("2"),
            namespaced: vec![],
            cluster: vec![cl(
                "both",
                spec(vec![format("sklearn", Some("1"), true, None), format("sklearn", Some("2"), true, None)]),
            )],
            want: Ok(("both", Cluster)),
        },
    ]);
}

#[test]
fn protocols_default_to_v1_and_a_runtime_without_a_list_speaks_any() {
    let p = |protocol: &str| model(json!({"modelFormat": {"name": "sklearn"}, "protocolVersion": protocol}));
    let speaks = |name: &str, protocols: Value| cl(name, with(auto("sklearn"), "protocolVersions", protocols));
    check(vec![
        Case {
            what: "a model without protocolVersion is v1: a v2-only runtime does not serve it",
            model: sklearn(),
            namespaced: vec![],
            cluster: vec![speaks("v2-only", json!(["v2"]))],
            want: Err("NoSupportingRuntime"),
        },
        Case {
            what: "v2 asked, v2 listed",
            model: p("v2"),
            namespaced: vec![],
            cluster: vec![speaks("v1-only", json!(["v1"])), speaks("both", json!(["v1", "v2"]))],
            want: Ok(("both", Cluster)),
        },
        Case {
            what: "a runtime that lists none serves any protocol",
            model: p("grpc-v2"),
            namespaced: vec![],
            cluster: vec![cl("unlisted", auto("sklearn"))],
            want: Ok(("unlisted", Cluster)),
        },
    ]);
}

#[test]
fn ties_go_to_the_lowest_protocol_then_the_newest_then_the_name() {
    let speaks = |name: &str, protocols: Value| cl(name, with(auto("sklearn"), "protocolVersions", protocols));
    check(vec![
        Case {
            what: "a runtime whose lowest protocol is v1 before one whose lowest is v2, before one that lists none",
            model: model(json!({"modelFormat": {"name": "sklearn"}, "protocolVersion": "v2"})),
            namespaced: vec![],
            cluster: vec![
                cl("a-none", auto("sklearn")),
                speaks("b-v2", json!(["v2"])),
                speaks("c-v1", json!(["v2", "v1"])),
            ],
            want: Ok(("c-v1", Cluster)),
        },
        Case {
            what: "the newest first",
            model: sklearn(),
            namespaced: vec![],
            cluster: vec![
                created(cl("a-old", auto("sklearn")), "2025-01-01T00:00:00Z"),
                created(cl("b-new", auto("sklearn")), "2026-01-01T00:00:00Z"),
                cl("c-unknown-age", auto("sklearn")),
            ],
            want: Ok(("b-new", Cluster)),
        },
        Case {
            what: "then by name",
            model: sklearn(),
            namespaced: vec![],
            cluster: vec![cl("b", auto("sklearn")), cl("a", auto("sklearn"))],
            want: Ok(("a", Cluster)),
        },
        Case {
            what: "priority before protocol and age",
            model: model(json!({"modelFormat": {"name": "sklearn"}, "protocolVersion": "v2"})),
            namespaced: vec![],
            cluster: vec![
                created(speaks("new-v1", json!(["v1", "v2"])), "2026-01-01T00:00:00Z"),
                cl(
                    "old-prio",
                    with(spec(vec![format("sklearn", None, true, Some(3))]), "protocolVersions", json!(["v2"])),
                ),
            ],
            want: Ok(("old-prio", Cluster)),
        },
    ]);
}

#[test]
fn the_whole_candidate_list_is_ordered() {
    let namespaced = vec![ns("ns-b", auto("sklearn")), ns("ns-a", spec(vec![format("sklearn", None, true, Some(1))]))];
    let cluster = vec![cl("cl-a", auto("sklearn")), cl("cl-b", spec(vec![format("sklearn", None, true, Some(7))]))];
    let names: Vec<(&str, bool)> =
        supporting_runtimes(&sklearn(), &namespaced, &cluster).iter().map(|s| (s.name, s.is_cluster())).collect();
    assert_eq!(names, [("ns-a", false), ("ns-b", false), ("cl-b", true), ("cl-a", true)]);
}

#[test]
fn a_named_runtime_must_exist_be_enabled_and_serve_the_format() {
    let named = |runtime: &str, extra: Value| {
        let mut m = json!({"modelFormat": {"name": "sklearn"}, "runtime": runtime});
        if let Value::Object(extra) = extra {
            m.as_object_mut().unwrap().extend(extra);
        }
        model(m)
    };
    let manual = spec(vec![format("sklearn", None, false, None)]);
    check(vec![
        Case {
            what: "the namespace's runtime before the cluster's of the same name",
            model: named("rt", json!({})),
            namespaced: vec![ns("rt", manual.clone())],
            cluster: vec![cl("rt", manual.clone())],
            want: Ok(("rt", Namespaced)),
        },
        Case {
            what: "the cluster's when the namespace has none of that name; autoSelect is not needed",
            model: named("rt", json!({})),
            namespaced: vec![ns("other", auto("sklearn"))],
            cluster: vec![cl("rt", manual.clone())],
            want: Ok(("rt", Cluster)),
        },
        Case {
            what: "a name that is neither",
            model: named("missing", json!({})),
            namespaced: vec![ns("rt", auto("sklearn"))],
            cluster: vec![cl("rt2", auto("sklearn"))],
            want: Err("RuntimeNotFound"),
        },
        Case {
            what: "a disabled runtime",
            model: named("rt", json!({})),
            namespaced: vec![],
            cluster: vec![cl("rt", with(auto("sklearn"), "disabled", json!(true)))],
            want: Err("RuntimeDisabled"),
        },
        Case {
            what: "a disabled namespace runtime hides the cluster's of the same name (KServe looks no further)",
            model: named("rt", json!({})),
            namespaced: vec![ns("rt", with(auto("sklearn"), "disabled", json!(true)))],
            cluster: vec![cl("rt", auto("sklearn"))],
            want: Err("RuntimeDisabled"),
        },
        Case {
            what: "a runtime that does not list the format",
            model: named("rt", json!({})),
            namespaced: vec![],
            cluster: vec![cl("rt", auto("xgboost"))],
            want: Err("RuntimeFormatUnsupported"),
        },
        Case {
            what: "a runtime that lists another version",
            model: named("rt", json!({"modelFormat": {"name": "sklearn", "version": "2"}})),
            namespaced: vec![],
            cluster: vec![cl("rt", spec(vec![format("sklearn", Some("1"), true, None)]))],
            want: Err("RuntimeFormatUnsupported"),
        },
        Case {
            what: "a protocolVersion the runtime does not list",
            model: named("rt", json!({"protocolVersion": "grpc-v2"})),
            namespaced: vec![],
            cluster: vec![cl("rt", with(auto("sklearn"), "protocolVersions", json!(["v1", "v2"])))],
            want: Err("RuntimeProtocolUnsupported"),
        },
        Case {
            what: "no protocolVersion: a named runtime's protocols are not checked",
            model: named("rt", json!({})),
            namespaced: vec![],
            cluster: vec![cl("rt", with(auto("sklearn"), "protocolVersions", json!(["v2"])))],
            want: Ok(("rt", Cluster)),
        },
        Case {
            what: "an ONNX model that names a runtime uses it",
            model: model(json!({"modelFormat": {"name": "onnx"}, "runtime": "triton"})),
            namespaced: vec![],
            cluster: vec![cl("triton", spec(vec![format("onnx", Some("1"), true, None)]))],
            want: Ok(("triton", Cluster)),
        },
    ]);
}

#[test]
fn errors_name_what_is_wrong_and_carry_kserves_reason() {
    let none: [ClusterServingRuntime; 0] = [];
    let m = model(json!({"modelFormat": {"name": "xgboost", "version": "2"}, "protocolVersion": "v2"}));
    let e = select_runtime(&m, &[], &none).unwrap_err();
    assert_eq!(
        e.to_string(),
        "spec.predictor.model.modelFormat: no ServingRuntime or ClusterServingRuntime supports model format xgboost \
         version 2 with autoSelect and protocol v2; create one, or name one with spec.predictor.model.runtime"
    );
    assert_eq!(e.runtime_reason(), Some("NoSupportingRuntime"));

    let e = select_runtime(&sklearn(), &[], &none).unwrap_err();
    assert!(e.to_string().contains("model format sklearn with autoSelect and protocol v1"), "{e}");

    let named = |runtime: &str, protocol: Option<&str>| {
        let mut m = json!({"modelFormat": {"name": "sklearn"}, "runtime": runtime});
        if let Some(p) = protocol {
            m["protocolVersion"] = json!(p);
        }
        model(m)
    };
    let namespaced = [ns("off", with(auto("sklearn"), "disabled", json!(true)))];
    let cluster = [cl("xgb", with(auto("xgboost"), "protocolVersions", json!(["v1", "v2"])))];
    let cases = [
        (
            named("nope", None),
            "spec.predictor.model.runtime: no ServingRuntime in the namespace and no ClusterServingRuntime is named \"nope\"",
            "RuntimeNotRecognized",
        ),
        (named("off", None), "spec.predictor.model.runtime: ServingRuntime \"off\" is disabled", "RuntimeDisabled"),
        (
            named("xgb", Some("grpc-v2")),
            "spec.predictor.model.protocolVersion: ClusterServingRuntime \"xgb\" does not support protocol grpc-v2 \
             (it supports v1, v2)",
            "NoSupportingRuntime",
        ),
        (
            named("xgb", None),
            "spec.predictor.model.modelFormat: ClusterServingRuntime \"xgb\" does not support model format sklearn",
            "NoSupportingRuntime",
        ),
    ];
    for (m, message, reason) in cases {
        let e = select_runtime(&m, &namespaced, &cluster).unwrap_err();
        assert_eq!(e.to_string(), message);
        assert_eq!(e.runtime_reason(), Some(reason), "{message}");
    }
    assert_eq!(Error::invalid("x", "y").runtime_reason(), None);
}

#[test]
fn onnx_without_a_runtime_stays_on_the_embedded_server() {
    for (m, embedded) in [
        (json!({"modelFormat": {"name": "onnx"}}), true),
        (json!({"modelFormat": {"name": "ONNX", "version": "1"}, "protocolVersion": "v2"}), true),
        (json!({"modelFormat": {"name": "onnx"}, "runtime": "kserve-tritonserver"}), false),
        (json!({"modelFormat": {"name": "sklearn"}}), false),
        (json!({"modelFormat": {"name": "sklearn"}, "runtime": "kserve-sklearnserver"}), false),
        (json!({"modelFormat": {"name": "tensorflow"}}), false),
    ] {
        assert_eq!(uses_embedded_server(&model(m.clone())), embedded, "{m}");
    }
    assert_eq!(model_protocol(&sklearn()), "v1");
}

/// A runtime written as KServe ships them, with fields Skiff does not read.
const KSERVE_LIKE: &str = r#"
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata:
  name: kserve-mlserver
  annotations:
    prometheus.kserve.io/port: "8080"
    prometheus.kserve.io/path: /metrics
spec:
  annotations:
    prometheus.kserve.io/port: "8080"
  supportedModelFormats:
    - name: sklearn
      version: "1"
      autoSelect: true
      priority: 2
    - name: xgboost
      version: "2"
      autoSelect: true
      priority: 2
    - name: mlflow
      version: "1"
      autoSelect: true
  multiModel: false
  protocolVersions: [v2]
  containers:
    - name: kserve-container
      image: docker.io/seldonio/mlserver:1.5.0
      env:
        - name: MLSERVER_MODEL_IMPLEMENTATION
          value: "{{.Labels.modelClass}}"
        - name: MLSERVER_HTTP_PORT
          value: "8080"
      resources:
        requests: {cpu: "1", memory: 2Gi}
        limits: {cpu: "1", memory: 2Gi}
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {drop: [ALL]}
        privileged: false
        runAsNonRoot: true
  volumes:
    - name: cache
      emptyDir: {}
  nodeSelector:
    kubernetes.io/os: linux
  tolerations:
    - key: gpu
      operator: Exists
  storageHelper:
    disabled: false
  grpcDataEndpoint: port:8001
  httpDataEndpoint: port:8080
  builtInAdapter:
    serverType: mlserver
    runtimeManagementPort: 8001
    memBufferBytes: 134217728
    modelLoadingTimeoutMillis: 90000
"#;

#[test]
fn kserve_runtimes_parse_and_keep_every_field() {
    let runtime = cluster_serving_runtime_from_yaml(KSERVE_LIKE).unwrap();
    assert_eq!(runtime.metadata.name.as_deref(), Some("kserve-mlserver"));
    let spec = &runtime.spec;
    assert_eq!(spec.supported_model_formats.len(), 3);
    assert_eq!(spec.priority("SKLEARN"), Some(2));
    assert_eq!(spec.priority("mlflow"), None);
    assert_eq!(spec.protocol_versions, ["v2"]);
    assert_eq!(spec.containers[0].image.as_deref(), Some("docker.io/seldonio/mlserver:1.5.0"));
    assert_eq!(spec.volumes[0].name, "cache");
    assert!(spec.other.contains_key("nodeSelector") && spec.other.contains_key("builtInAdapter"));
    let original: Value = serde_saphyr::from_str(KSERVE_LIKE).unwrap();
    assert_eq!(serde_json::to_value(&runtime).unwrap(), original);

    let namespaced: ServingRuntime =
        serving_runtime_from_yaml(&KSERVE_LIKE.replace("kind: ClusterServingRuntime", "kind: ServingRuntime")).unwrap();
    assert_eq!(namespaced.spec, runtime.spec.spec);
    assert!(matches!(serving_runtime_from_yaml("spec: [1]"), Err(Error::ParseManifest { kind: "ServingRuntime", .. })));
}

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_example_runtime_serves_sklearn_models() {
    let text = std::fs::read_to_string(repo().join("examples/runtimes/kserve-sklearnserver.yaml")).unwrap();
    let runtime = cluster_serving_runtime_from_yaml(&text).unwrap();
    let v2 = model(json!({"modelFormat": {"name": "sklearn", "version": "1"}, "protocolVersion": "v2"}));
    let chosen = select_runtime(&v2, &[], std::slice::from_ref(&runtime)).unwrap();
    assert_eq!((chosen.name, chosen.kind), ("kserve-sklearnserver", Cluster));
    assert!(chosen.spec.containers[0].args.iter().flatten().any(|a| a == "--model_dir=/mnt/models"));
}

#[test]
fn the_test_runtime_fixture_serves_sklearn_models() {
    let dir = repo().join("tests/fixtures/runtimes");
    let runtime =
        cluster_serving_runtime_from_yaml(&std::fs::read_to_string(dir.join("v2-test-runtime.yaml")).unwrap()).unwrap();
    let isvc =
        crate::InferenceService::from_yaml(&std::fs::read_to_string(dir.join("sklearn-isvc.yaml")).unwrap()).unwrap();
    let m = isvc.spec.predictor.model.as_ref().unwrap();
    assert!(!uses_embedded_server(m));
    let chosen = select_runtime(m, &[], std::slice::from_ref(&runtime)).unwrap();
    assert_eq!(chosen.name, runtime.metadata.name.as_deref().unwrap());
}

#[test]
fn the_checked_in_crds_are_up_to_date() {
    for (crd, path) in [
        (servingruntimes_crd(), SERVINGRUNTIMES_CRD_PATH),
        (clusterservingruntimes_crd(), CLUSTERSERVINGRUNTIMES_CRD_PATH),
    ] {
        let generated = crd_yaml(&crd, path).unwrap();
        let helm = path.replace("deploy/crds/", "deploy/helm/skiff/crds/");
        for file in [path, helm.as_str()] {
            let checked_in = std::fs::read_to_string(repo().join(file)).unwrap_or_default();
            assert!(
                checked_in == generated,
                "{file} is stale: regenerate it with `cargo run -q -p skiff-api --bin crdgen {} > {file}` \
                 (from the repository root) and commit the result",
                crd.spec.names.plural
            );
        }
        let kustomization = std::fs::read_to_string(repo().join("deploy/crds/kustomization.yaml")).unwrap();
        let file = Path::new(path).file_name().unwrap().to_str().unwrap();
        assert!(kustomization.contains(&format!("- {file}")), "deploy/crds/kustomization.yaml lists {file}");
    }
}

#[test]
fn names_scope_and_columns_are_kserves() {
    for (crd, name, kind, scope) in [
        (servingruntimes_crd(), "servingruntimes.serving.kserve.io", "ServingRuntime", "Namespaced"),
        (clusterservingruntimes_crd(), "clusterservingruntimes.serving.kserve.io", "ClusterServingRuntime", "Cluster"),
    ] {
        assert_eq!(crd.metadata.name.as_deref(), Some(name));
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(crd.spec.scope, scope);
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let columns: Vec<&str> = version.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["Disabled", "ModelType", "Containers", "Age"]);
    }
}

#[test]
fn both_kinds_share_one_schema_that_keeps_unknown_fields() {
    let schema = |crd: CustomResourceDefinition| {
        let root = crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.clone().unwrap();
        let mut spec = serde_json::to_value(&root.properties.unwrap()["spec"]).unwrap();
        spec.as_object_mut().unwrap().remove("description");
        spec
    };
    let spec = schema(servingruntimes_crd());
    assert_eq!(spec, schema(clusterservingruntimes_crd()));
    assert_eq!(spec["x-kubernetes-preserve-unknown-fields"], json!(true));
    assert!(spec.get("additionalProperties").is_none());
    assert_eq!(spec["required"], json!(["containers"]));
    let p = &spec["properties"];
    assert_eq!(p["containers"]["minItems"], json!(1));
    assert!(p["containers"].get("default").is_none());
    assert_eq!(p["containers"]["items"]["x-kubernetes-preserve-unknown-fields"], json!(true));
    let formats = &p["supportedModelFormats"]["items"];
    assert_eq!(formats["required"], json!(["name"]));
    assert_eq!(formats["properties"]["priority"]["minimum"], json!(1.0));
    assert_eq!(formats["x-kubernetes-preserve-unknown-fields"], json!(true));
}

#[test]
fn the_shipped_kserve_runtimes_are_listed_copied_into_the_chart_and_parse() {
    let dir = repo().join(defaults::RUNTIMES_DIR);
    let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("kserve-") && n.ends_with(".yaml"))
        .collect();
    on_disk.sort();
    let mut built_in: Vec<String> = defaults::RUNTIME_FILES.iter().map(|(n, _)| (*n).to_owned()).collect();
    built_in.sort();
    assert_eq!(built_in, on_disk, "every file of deploy/runtimes is built in");
    for (name, text) in defaults::RUNTIME_FILES {
        assert!(kustomization.contains(&format!("- {name}")), "deploy/runtimes/kustomization.yaml lists {name}");
        let chart = std::fs::read_to_string(repo().join("deploy/helm/skiff/runtimes").join(name)).unwrap_or_default();
        assert!(chart == *text, "deploy/helm/skiff/runtimes/{name} differs: cp deploy/runtimes/{name} there");
        let runtime = cluster_serving_runtime_from_yaml(text).unwrap();
        assert_eq!(format!("{}.yaml", runtime.metadata.name.as_deref().unwrap()), *name);
        let image = runtime.spec.containers[0].image.as_deref().unwrap();
        assert!(!image.ends_with(":replace") && image.contains(':'), "{name}: {image} has a concrete tag");
    }
    assert_eq!(defaults::kserve_runtimes().unwrap().len(), on_disk.len());
}

#[test]
fn the_shipped_runtimes_are_chosen_as_kserve_chooses_its_own() {
    let runtimes = defaults::kserve_runtimes().unwrap();
    let chosen = |predictor: &str| {
        let text = format!(
            "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {{name: m}}\nspec:\n  predictor:\n    {predictor}\n"
        );
        let isvc = crate::InferenceService::from_yaml(&text).unwrap();
        let model = crate::shorthand::model_of(&isvc.spec.predictor).unwrap().unwrap();
        if uses_embedded_server(&model) {
            return "embedded".to_owned();
        }
        select_runtime(&model, &[], &runtimes).map(|r| r.name.to_owned()).unwrap_or_else(|e| e.to_string())
    };
    let cases = [
        ("sklearn: {storageUri: 'gs://kfserving-examples/models/sklearn/1.0/model'}", "kserve-sklearnserver"),
        ("model: {modelFormat: {name: sklearn}, storageUri: 'gs://b/m'}", "kserve-sklearnserver"),
        ("sklearn: {protocolVersion: v2, storageUri: 'gs://seldon-models/sklearn/iris'}", "kserve-mlserver"),
        ("xgboost: {storageUri: 'gs://b/m'}", "kserve-xgbserver"),
        ("xgboost: {storageUri: 'gs://b/m', protocolVersion: v2}", "kserve-mlserver"),
        ("lightgbm: {storageUri: 'gs://b/m'}", "kserve-lgbserver"),
        ("tensorflow: {storageUri: 'gs://b/m'}", "kserve-tensorflow-serving"),
        ("tensorflow: {storageUri: 'gs://b/m', protocolVersion: v2}", "kserve-tritonserver"),
        ("pytorch: {storageUri: 'gs://b/m'}", "kserve-torchserve"),
        ("triton: {storageUri: 'gs://b/m'}", "kserve-tritonserver"),
        ("huggingface: {storageUri: 'hf://org/m'}", "kserve-huggingfaceserver"),
        ("pmml: {storageUri: 'gs://b/m'}", "kserve-pmmlserver"),
        ("paddle: {storageUri: 'gs://b/m'}", "kserve-paddleserver"),
        ("model: {modelFormat: {name: mlflow}, protocolVersion: v2, storageUri: 'gs://b/m'}", "kserve-mlserver"),
        ("onnx: {storageUri: 'gs://b/m'}", "embedded"),
        ("model: {modelFormat: {name: onnx}, storageUri: 'gs://b/m'}", "embedded"),
        (
            "model: {modelFormat: {name: onnx}, runtime: kserve-tritonserver, storageUri: 'gs://b/m'}",
            "kserve-tritonserver",
        ),
    ];
    for (predictor, want) in cases {
        assert_eq!(chosen(predictor), want, "{predictor}");
    }
    let none = chosen("model: {modelFormat: {name: pytorch}, protocolVersion: grpc-v1, storageUri: 'gs://b/m'}");
    assert!(none.contains("pytorch"), "{none}");
}
