use serde_json::json;
use skiff_api::InferenceService;

use super::*;

fn predictor(yaml: &str) -> PredictorSpec {
    let manifest = format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\nspec:\n  predictor:\n{yaml}"
    );
    InferenceService::from_yaml(&manifest).unwrap().spec.predictor
}

fn revision() -> RevisionRef {
    RevisionRef {
        service: "iris".into(),
        namespace: "ml".into(),
        component: Component::Predictor,
        name: "iris-predictor-00002".into(),
        number: 2,
        serving: Serving::default(),
    }
}

fn record() -> Record {
    Record { template_hash: "hash".into(), initial_scale: 1, scaling: Default::default() }
}

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "serving.kserve.io/v1beta1".into(),
        kind: "InferenceService".into(),
        name: "iris".into(),
        uid: "uid-1".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn build(yaml: &str) -> Result<Deployment, String> {
    deployment(&revision(), &owner(), &predictor(yaml), &record(), Some(1), &Platform::default(), None)
}

fn pod_of(d: &Deployment) -> serde_json::Value {
    serde_json::to_value(&d.spec.as_ref().unwrap().template).unwrap()["spec"].clone()
}

const MODEL: &str = "    containerConcurrency: 4\n    serviceAccountName: reader\n    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n      resources: {limits: {cpu: '1'}}\n";

#[test]
fn a_model_runs_skiff_server_on_a_host_path() {
    let d = build(MODEL).unwrap();
    let meta = &d.metadata;
    assert_eq!(meta.name.as_deref(), Some("iris-predictor-00002"));
    assert_eq!(meta.namespace.as_deref(), Some("ml"));
    assert_eq!(meta.owner_references.as_ref().unwrap()[0].uid, "uid-1");
    let labels = meta.labels.as_ref().unwrap();
    assert_eq!(labels["serving.kserve.io/inferenceservice"], "iris");
    assert_eq!(labels["skiff.dev/revision"], "2");
    assert_eq!(labels["component"], "predictor");
    let annotations = meta.annotations.as_ref().unwrap();
    assert_eq!(annotations["skiff.dev/template-hash"], "hash");
    assert_eq!(annotations["skiff.dev/initial-scale"], "1");
    assert!(annotations.contains_key("skiff.dev/applied-hash"));
    let spec = d.spec.as_ref().unwrap();
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.selector.match_labels.as_ref().unwrap().len(), 2);

    let pod = pod_of(&d);
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "kserve-container");
    assert_eq!(c["image"], DEFAULT_IMAGE);
    assert_eq!(
        c["args"],
        json!([
            "--model-dir",
            "/mnt/models",
            "--model-name",
            "iris",
            "--http-port",
            "8080",
            "--container-concurrency",
            "4",
            "--shutdown-delay-secs",
            "3",
            "--termination-message-path",
            "/dev/termination-log"
        ])
    );
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "FallbackToLogsOnError");
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/v2/health/ready");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/v2/health/live");
    assert_eq!(c["resources"]["limits"]["cpu"], "1");
    assert_eq!(c["volumeMounts"][0], json!({"name": MODEL_VOLUME, "mountPath": "/mnt/models", "readOnly": true}));
    assert_eq!(pod["volumes"][0]["hostPath"], json!({"path": "/models/iris", "type": "Directory"}));
    assert_eq!(pod["serviceAccountName"], "reader");
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["enableServiceLinks"], false);
}

const DEFAULT_IMAGE: &str = crate::platform::DEFAULT_SERVER_IMAGE;

#[test]
fn a_pvc_is_mounted_with_its_sub_path_and_other_schemes_are_downloaded() {
    let d = build(&MODEL.replace("file:///models/iris", "pvc://models/iris/v1")).unwrap();
    let pod = pod_of(&d);
    assert_eq!(pod["volumes"][0]["persistentVolumeClaim"], json!({"claimName": "models", "readOnly": true}));
    assert_eq!(pod["containers"][0]["volumeMounts"][0]["subPath"], "iris/v1");

    let d = build(&MODEL.replace("file:///models/iris", "gs://bucket/iris")).unwrap();
    let pod = pod_of(&d);
    assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
    let init = &pod["initContainers"][0];
    assert_eq!(init["name"], "storage-initializer");
    assert_eq!(init["image"], crate::platform::DEFAULT_STORAGE_INITIALIZER_IMAGE);
    assert_eq!(init["args"], json!(["gs://bucket/iris", "/mnt/models"]));
    assert_eq!(init["volumeMounts"][0]["mountPath"], "/mnt/models");
    assert!(init["volumeMounts"][0].get("readOnly").is_none());
}

#[test]
fn batching_flags_follow_the_batcher() {
    let d = build(&format!("{MODEL}    batcher: {{maxBatchSize: 16, maxLatency: 20}}\n")).unwrap();
    let args = pod_of(&d)["containers"][0]["args"].clone();
    let args: Vec<&str> = args.as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let batching = ["--enable-batching", "--max-batch-size", "16", "--max-latency-ms", "20"];
    assert!(args.windows(batching.len()).any(|w| w == batching), "{args:?}");
}

#[test]
fn custom_containers_are_kept_with_kserve_defaults() {
    let d = build("    containers:\n    - image: my/model:1\n      env: [{name: A, value: b}]\n").unwrap();
    let pod = pod_of(&d);
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "kserve-container");
    assert_eq!(c["image"], "my/model:1");
    assert_eq!(c["env"][0]["value"], "b");
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert!(pod.get("automountServiceAccountToken").is_none());

    let d =
        build("    containers:\n    - name: web\n      image: my/web\n      ports: [{containerPort: 9000}]\n").unwrap();
    assert_eq!(pod_port(&d), 9000);
}

fn pod_port(d: &Deployment) -> i64 {
    pod_of(d)["containers"][0]["ports"][0]["containerPort"].as_i64().unwrap()
}

#[test]
fn what_cannot_be_served_is_refused_with_the_field_named() {
    let sklearn = build(&MODEL.replace("name: onnx", "name: sklearn")).unwrap_err();
    assert!(sklearn.starts_with("spec.predictor.model.modelFormat.name: skiff-server serves onnx"), "{sklearn}");
    let relative = build(&MODEL.replace("file:///models/iris", "file://./iris")).unwrap_err();
    assert!(relative.starts_with("spec.predictor.model.storageUri:"), "{relative}");
    let shorthand = build("    sklearn: {storageUri: 'gs://x'}\n").unwrap_err();
    assert!(shorthand.starts_with("spec.predictor.sklearn:"), "{shorthand}");
    let bad_container = build("    containers:\n    - image: 5\n      ports: nope\n").unwrap_err();
    assert!(bad_container.starts_with("spec.predictor.containers[0]:"), "{bad_container}");
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
fn a_custom_container_gets_the_queue_proxy_and_its_service_targets_it() {
    let mut revision = revision();
    revision.serving = Serving { container_concurrency: 4, timeout_secs: 60, queue_proxy: true };
    let predictor = predictor("    containers:\n    - image: my/web\n      ports: [{containerPort: 9000}]\n");
    let d = deployment(&revision, &owner(), &predictor, &record(), Some(0), &Platform::default(), None).unwrap();
    let pod = pod_of(&d);
    let sidecar = &pod["containers"][1];
    assert_eq!(sidecar["name"], "queue-proxy");
    assert_eq!(sidecar["image"], crate::platform::DEFAULT_QUEUE_PROXY_IMAGE);
    let args: Vec<&str> = sidecar["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        args,
        [
            "queue-proxy",
            "--port",
            "8012",
            "--upstream",
            "127.0.0.1:9000",
            "--container-concurrency",
            "4",
            "--timeout-secs",
            "60",
            "--drain-delay-secs",
            "3"
        ]
    );
    assert_eq!(sidecar["readinessProbe"]["httpGet"]["path"], "/healthz");
    let observed = crate::revisions::observe(std::slice::from_ref(&d), "uid-1");
    assert_eq!(observed[0].port, QUEUE_PROXY_PORT, "the Service targets the queue-proxy");
    assert_eq!(observed[0].serving, revision.serving, "the labels give the settings back");
    let labels = &d.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["serving.kserve.io/inferenceservice"], "iris");
    assert_eq!(labels["component"], "predictor");
    assert_eq!(labels["skiff.dev/container-concurrency"], "4");
    assert_eq!(labels["skiff.dev/queue-proxy"], "true", "the activator probes /healthz on the queue-proxy");
}

/// The container-level settings of Kubernetes' `restricted` profile.
fn restricted(read_only_root: bool) -> serde_json::Value {
    let mut context = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    if read_only_root {
        context["readOnlyRootFilesystem"] = true.into();
    }
    context
}

#[test]
fn model_pods_run_restricted_with_a_read_only_root_and_scratch_at_tmp() {
    let pod = pod_of(&build(&MODEL.replace("file:///models/iris", "gs://bucket/iris")).unwrap());
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    let scratch = json!({"name": "skiff-scratch", "mountPath": "/tmp"});
    for c in [&pod["containers"][0], &pod["initContainers"][0]] {
        assert_eq!(c["securityContext"], restricted(true), "{}", c["name"]);
        let mounts = c["volumeMounts"].as_array().unwrap();
        assert_eq!(mounts.last(), Some(&scratch), "{}: /tmp is mounted last", c["name"]);
    }
    assert_eq!(pod["initContainers"][0]["env"], json!([{"name": "HOME", "value": "/tmp"}]));
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(volumes.contains(&json!({"name": "skiff-scratch", "emptyDir": {}})), "{volumes:?}");
}

#[test]
fn what_the_predictor_sets_wins_over_the_restricted_defaults() {
    let own = format!(
        "{MODEL}    securityContext: {{runAsUser: 1000, seccompProfile: {{type: Localhost, localhostProfile: p.json}}}}\n"
    )
    .replace(
        "      resources:",
        "      securityContext: {readOnlyRootFilesystem: false, capabilities: {add: [NET_BIND_SERVICE]}}\n      resources:",
    );
    let pod = pod_of(&build(&own).unwrap());
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 65532,
               "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}})
    );
    assert_eq!(
        pod["containers"][0]["securityContext"],
        json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": false,
               "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}})
    );
    let root = pod_of(&build(&format!("{MODEL}    securityContext: {{runAsUser: 0}}\n")).unwrap());
    assert!(root["securityContext"].get("runAsNonRoot").is_none(), "root asked for: not refused by runAsNonRoot");
    let mounted =
        MODEL.replace("      resources:", "      volumeMounts: [{name: own, mountPath: /tmp/}]\n      resources:");
    let mounted = format!("{mounted}    volumes: [{{name: own, emptyDir: {{}}}}]\n");
    let pod = pod_of(&build(&mounted).unwrap());
    let paths: Vec<&str> =
        pod["containers"][0]["volumeMounts"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(paths, ["own", "kserve-provision-location"], "a /tmp of its own is kept");
    assert!(pod["volumes"].as_array().unwrap().iter().all(|v| v["name"] != "skiff-scratch"));
}

#[test]
fn custom_containers_and_init_containers_get_the_restricted_settings_but_keep_a_writable_root() {
    let pod = pod_of(
        &build("    initContainers: [{name: prep, image: busybox}]\n    containers:\n    - image: my/model:1\n")
            .unwrap(),
    );
    assert_eq!(pod["containers"][0]["securityContext"], restricted(false));
    assert_eq!(pod["initContainers"][0]["securityContext"], restricted(false));
    assert_eq!(pod["containers"][1]["securityContext"], restricted(true), "the queue-proxy");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(pod.get("volumes").is_none(), "no scratch: nothing mounts it");
}

#[test]
fn host_path_storage_is_refused_when_the_admin_says_so() {
    let closed = Platform { allow_host_path: false, ..Platform::default() };
    let refused = deployment(&revision(), &owner(), &predictor(MODEL), &record(), None, &closed, None).unwrap_err();
    assert!(refused.starts_with("spec.predictor.model.storageUri: file:///models/iris: file://"), "{refused}");
    assert!(refused.contains("inferenceservice-config key skiff sets allowHostPath to false"), "{refused}");
    let pvc = predictor(&MODEL.replace("file:///models/iris", "pvc://models/iris"));
    assert!(
        deployment(&revision(), &owner(), &pvc, &record(), None, &closed, None).is_ok(),
        "other schemes still serve"
    );
}

#[test]
fn the_deployment_records_the_scaling_inputs() {
    let scaling = skiff_api::scaling::ScalingInputs { min_replicas: Some(0), ..Default::default() };
    let record = Record { scaling, ..record() };
    let d = deployment(&revision(), &owner(), &predictor(MODEL), &record, None, &Platform::default(), None).unwrap();
    let text = &d.metadata.annotations.as_ref().unwrap()["skiff.dev/scaling"];
    let back: skiff_api::scaling::ScalingInputs = serde_json::from_str(text).unwrap();
    assert_eq!(back.min_replicas, Some(0));
}

#[test]
fn the_queue_proxy_gets_the_logger_and_the_batcher_of_a_custom_container() {
    let mut revision = revision();
    revision.serving = Serving { container_concurrency: 0, timeout_secs: 60, queue_proxy: true };
    let logged = predictor(
        "    logger: {url: 'http://sink.ml/events', mode: response}\n    batcher: {maxBatchSize: 8, maxLatency: 50}\n    \
         containers:\n    - image: my/web\n",
    );
    let d = deployment(&revision, &owner(), &logged, &record(), Some(0), &Platform::default(), None).unwrap();
    let pod = pod_of(&d);
    let args = |i: usize| -> Vec<String> {
        pod["containers"][i]["args"]
            .as_array()
            .map_or_else(Vec::new, |a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
    };
    let sidecar = args(1);
    let tail = [
        "--enable-batching",
        "--max-batch-size",
        "8",
        "--max-latency-ms",
        "50",
        "--logger-url",
        "http://sink.ml/events",
        "--logger-mode",
        "response",
        "--logger-source",
        "http://iris-predictor.ml",
        "--inference-service",
        "iris",
        "--namespace",
        "ml",
        "--component",
        "predictor",
        "--revision",
        "iris-predictor-00002",
        // The cluster's sink rule: no loopback (no --logger-allow-loopback), the platform's own names refused.
        "--logger-protected-hosts",
        "*.skiff-system,*.skiff-system.svc,*.skiff-system.svc.cluster.local,kubernetes.default,kubernetes.default.svc,\
         kubernetes.default.svc.cluster.local",
    ];
    assert!(sidecar.ends_with(&tail.map(str::to_owned)), "{sidecar:?}");
    assert!(args(0).is_empty(), "the user's container is left as written");

    let plain = predictor("    containers:\n    - image: my/web\n");
    let d = deployment(&revision, &owner(), &plain, &record(), Some(0), &Platform::default(), None).unwrap();
    let sidecar = pod_of(&d)["containers"][1]["args"].clone();
    assert!(!sidecar.to_string().contains("--logger") && !sidecar.to_string().contains("batching"), "{sidecar}");
}

fn transformer_revision() -> RevisionRef {
    RevisionRef {
        component: Component::Transformer,
        name: "iris-transformer-00001".into(),
        number: 1,
        serving: Serving { container_concurrency: 0, timeout_secs: 300, queue_proxy: true },
        ..revision()
    }
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value.as_array().map_or_else(Vec::new, |a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
}

#[test]
fn a_transformer_runs_its_container_behind_the_queue_proxy_with_kserves_arguments() {
    let spec = predictor("    containers:\n    - image: my/transformer\n      args: [--verbose]\n");
    let d =
        deployment(&transformer_revision(), &owner(), &spec, &record(), Some(0), &Platform::default(), None).unwrap();
    let labels = d.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["component"], "transformer");
    assert_eq!(labels["skiff.dev/revision-name"], "iris-transformer-00001");
    assert_eq!(labels["skiff.dev/revision"], "1", "the Deployment carries its number, for the autoscaler");
    let selector = d.spec.as_ref().unwrap().selector.match_labels.clone().unwrap();
    assert_eq!(
        selector,
        [
            ("serving.kserve.io/inferenceservice".to_owned(), "iris".to_owned()),
            ("skiff.dev/revision-name".to_owned(), "iris-transformer-00001".to_owned())
        ]
        .into()
    );
    let pod_labels = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert!(
        !pod_labels.contains_key("skiff.dev/revision"),
        "a transformer's pods stay out of the selector of predictor revision 1: {pod_labels:?}"
    );
    assert_eq!(pod_labels["component"], "transformer");

    let pod = pod_of(&d);
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "kserve-container");
    let host = "skiff-router.skiff-system.svc.cluster.local/serving/ml/iris-predictor";
    assert_eq!(
        strings(&c["args"]),
        ["--verbose", "--model_name", "iris", "--predictor_host", host, "--http_port", "8080"],
        "the container's own arguments first"
    );
    assert_eq!(c["env"], json!([{"name": "PREDICTOR_HOST", "value": host}]));
    let sidecar = &pod["containers"][1];
    assert_eq!(sidecar["name"], "queue-proxy");
    assert!(strings(&sidecar["args"]).contains(&"127.0.0.1:8080".to_owned()));

    let s = service(&transformer_revision(), &owner(), QUEUE_PROXY_PORT);
    assert_eq!(s.spec.as_ref().unwrap().selector.as_ref().unwrap(), &selector, "the Service selects the same pods");
    assert_eq!(s.metadata.labels.as_ref().unwrap()["component"], "transformer");
    let observed = crate::revisions::observe(std::slice::from_ref(&d), "uid-1");
    assert_eq!((observed[0].component, observed[0].number), (Component::Transformer, 1));
}

#[test]
fn what_the_container_sets_itself_is_kept_and_the_router_address_can_be_given() {
    let spec = predictor(
        "    containers:\n    - image: my/explainer\n      args: [--predictor_host=elsewhere:80, --http_port, '9000']\n      \
         ports: [{containerPort: 9000}]\n      env: [{name: PREDICTOR_HOST, value: elsewhere:80}]\n",
    );
    let revision =
        RevisionRef { component: Component::Explainer, name: "iris-explainer-00003".into(), ..transformer_revision() };
    let platform = Platform { router_address: Some("10.244.0.9:8080".into()), ..Platform::default() };
    let d = deployment(&revision, &owner(), &spec, &record(), Some(0), &platform, None).unwrap();
    let pod = pod_of(&d);
    let c = &pod["containers"][0];
    assert_eq!(strings(&c["args"]), ["--predictor_host=elsewhere:80", "--http_port", "9000", "--model_name", "iris"]);
    assert_eq!(c["env"], json!([{"name": "PREDICTOR_HOST", "value": "elsewhere:80"}]));
    assert_eq!(d.metadata.labels.as_ref().unwrap()["component"], "explainer");

    let plain = predictor("    containers:\n    - image: my/explainer\n");
    let d = deployment(&revision, &owner(), &plain, &record(), Some(0), &platform, None).unwrap();
    let args = strings(&pod_of(&d)["containers"][0]["args"]);
    assert_eq!(args[3], "10.244.0.9:8080/serving/ml/iris-predictor", "{args:?}");
}

#[test]
fn a_predictors_custom_container_gets_no_component_arguments() {
    let mut revision = revision();
    revision.serving.queue_proxy = true;
    let spec = predictor("    containers:\n    - image: my/web\n");
    let d = deployment(&revision, &owner(), &spec, &record(), Some(0), &Platform::default(), None).unwrap();
    let pod = pod_of(&d);
    assert!(pod["containers"][0]["args"].is_null() && pod["containers"][0]["env"].is_null(), "{pod}");
    let pod_labels = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
    assert_eq!(pod_labels["skiff.dev/revision"], "2", "a predictor's selector is as it always was");
}

#[test]
fn errors_name_the_components_field() {
    let spec = predictor("    containers:\n    - image: my/transformer\n      ports: oops\n");
    let err = deployment(&transformer_revision(), &owner(), &spec, &record(), Some(0), &Platform::default(), None)
        .unwrap_err();
    assert!(err.starts_with("spec.transformer.containers[0]:"), "{err}");
}

fn cluster_runtime(spec: serde_json::Value) -> skiff_api::runtime::ClusterServingRuntime {
    serde_json::from_value(json!({
        "apiVersion": "serving.kserve.io/v1alpha1",
        "kind": "ClusterServingRuntime",
        "metadata": {"name": "sk"},
        "spec": spec,
    }))
    .unwrap()
}

fn sk_runtime() -> skiff_api::runtime::ClusterServingRuntime {
    cluster_runtime(json!({
        "supportedModelFormats": [{"name": "sklearn", "autoSelect": true}],
        "protocolVersions": ["v2"],
        "labels": {"runtime-label": "yes", "component": "not-ours"},
        "annotations": {"prometheus.io/scrape": "true"},
        "nodeSelector": {"pool": "cpu"},
        "volumes": [{"name": "cache", "emptyDir": {}}],
        "containers": [
            {"name": "sidecar", "image": "helper:1", "args": ["--for={{.Name}}"]},
            {
                "name": "kserve-container",
                "image": "kserve/sklearnserver:v0.14",
                "args": ["--model_name={{.Name}}", "--model_dir=/mnt/models", "--namespace={{ .Namespace }}"],
                "env": [{"name": "A", "value": "runtime"}, {"name": "B", "value": "runtime"}],
                "resources": {"limits": {"cpu": "1", "memory": "2Gi"}},
            },
        ],
    }))
}

const SKLEARN: &str = "    containerConcurrency: 2\n    nodeSelector: {pool: gpu}\n    model:\n      modelFormat: {name: sklearn}\n      storageUri: file:///models/sum\n      args: [--workers=2]\n      env: [{name: B, value: model}, {name: C, value: model}]\n      resources: {limits: {memory: 4Gi}}\n";

fn build_on_runtime(yaml: &str, runtime: &skiff_api::runtime::ClusterServingRuntime) -> Result<Deployment, String> {
    let selected = skiff_api::runtime::SelectedRuntime {
        name: "sk",
        kind: skiff_api::runtime::RuntimeKind::Cluster,
        spec: &runtime.spec.spec,
    };
    let predictor = predictor(yaml);
    let mut revision = revision();
    revision.serving = Serving::of(&predictor);
    deployment(&revision, &owner(), &predictor, &record(), Some(0), &Platform::default(), Some(&selected))
}

#[test]
fn a_runtime_serves_a_model_skiff_server_does_not_behind_the_queue_proxy() {
    let runtime = sk_runtime();
    let d = build_on_runtime(SKLEARN, &runtime).unwrap();
    let pod = pod_of(&d);
    let names: Vec<&str> = pod["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["kserve-container", "sidecar", "queue-proxy"],
        "the serving container first, the queue-proxy last"
    );
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "kserve/sklearnserver:v0.14");
    assert_eq!(
        strings(&c["args"]),
        ["--model_name=iris", "--model_dir=/mnt/models", "--namespace=ml", "--workers=2"],
        "placeholders replaced; the model's args appended"
    );
    assert_eq!(strings(&pod["containers"][1]["args"]), ["--for=iris"]);
    let env: Vec<(String, String)> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().into(), e["value"].as_str().unwrap().into()))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    assert_eq!(env, [("A", "runtime"), ("B", "model"), ("C", "model"), ("PORT", "8080")], "merged by name");
    assert_eq!(c["resources"]["limits"], json!({"cpu": "1", "memory": "4Gi"}), "merged per key");
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert_eq!(c["volumeMounts"][0], json!({"name": MODEL_VOLUME, "mountPath": "/mnt/models", "readOnly": true}));
    assert!(c["securityContext"].get("readOnlyRootFilesystem").is_none(), "not Skiff's image: a writable root");
    assert_eq!(pod["volumes"][0], json!({"name": "cache", "emptyDir": {}}), "the runtime's volumes");
    assert_eq!(pod["volumes"][1]["hostPath"], json!({"path": "/models/sum", "type": "Directory"}));
    assert_eq!(pod["nodeSelector"], json!({"pool": "gpu"}), "the predictor's pod fields win over the runtime's");

    let sidecar = &pod["containers"][2];
    let args = strings(&sidecar["args"]);
    assert!(args.windows(2).any(|w| w == ["--upstream", "127.0.0.1:8080"]), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--container-concurrency", "2"]), "{args:?}");
    let observed = crate::revisions::observe(std::slice::from_ref(&d), "uid-1");
    assert_eq!(observed[0].port, QUEUE_PROXY_PORT, "the Service targets the queue-proxy");
    assert!(observed[0].serving.queue_proxy);

    let meta = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap();
    let labels = meta.labels.as_ref().unwrap();
    assert_eq!(labels["runtime-label"], "yes");
    assert_eq!(labels["component"], "predictor", "the runtime's labels never replace the revision's");
    assert_eq!(meta.annotations.as_ref().unwrap()["prometheus.io/scrape"], "true");
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["skiff.dev/runtime"], "ClusterServingRuntime/sk");
}

#[test]
fn a_runtime_gets_the_model_through_the_storage_initializer_or_a_claim() {
    let runtime = sk_runtime();
    let d = build_on_runtime(&SKLEARN.replace("file:///models/sum", "gs://bucket/sum"), &runtime).unwrap();
    let pod = pod_of(&d);
    let init = &pod["initContainers"][0];
    assert_eq!(init["name"], "storage-initializer");
    assert_eq!(init["args"], json!(["gs://bucket/sum", "/mnt/models"]));
    assert_eq!(pod["volumes"][1], json!({"name": MODEL_VOLUME, "emptyDir": {}}));
    assert_eq!(pod["containers"][0]["volumeMounts"][0]["mountPath"], "/mnt/models");

    let d = build_on_runtime(&SKLEARN.replace("file:///models/sum", "pvc://models/sum"), &runtime).unwrap();
    assert_eq!(pod_of(&d)["containers"][0]["volumeMounts"][0]["subPath"], "sum");
}

#[test]
fn a_runtime_container_without_the_kserve_name_serves_from_the_first_and_keeps_its_port() {
    let runtime = cluster_runtime(json!({
        "supportedModelFormats": [{"name": "sklearn"}],
        "containers": [{"name": "server", "image": "s:1", "ports": [{"containerPort": 9000}], "env": [{"name": "PORT", "value": "9000"}]}],
    }));
    let d = build_on_runtime(SKLEARN, &runtime).unwrap();
    let pod = pod_of(&d);
    assert_eq!(pod["containers"][0]["name"], "server");
    let ports: Vec<&str> = pod["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "PORT")
        .map(|e| e["value"].as_str().unwrap())
        .collect();
    assert_eq!(ports, ["9000"], "its own PORT kept");
    assert!(strings(&pod["containers"][1]["args"]).windows(2).any(|w| w == ["--upstream", "127.0.0.1:9000"]));

    let closed = Platform { allow_host_path: false, ..Platform::default() };
    let selected = skiff_api::runtime::SelectedRuntime {
        name: "sk",
        kind: skiff_api::runtime::RuntimeKind::Cluster,
        spec: &runtime.spec.spec,
    };
    let refused = deployment(&revision(), &owner(), &predictor(SKLEARN), &record(), None, &closed, Some(&selected));
    assert!(refused.unwrap_err().starts_with("spec.predictor.model.storageUri:"), "the platform's storage rules hold");
}

#[test]
fn only_onnx_without_a_runtime_stays_on_skiff_server_and_uses_no_queue_proxy() {
    assert!(!Serving::of(&predictor(MODEL)).queue_proxy);
    assert!(Serving::of(&predictor(SKLEARN)).queue_proxy);
    let named = MODEL.replace("modelFormat: {name: onnx}", "modelFormat: {name: onnx}\n      runtime: triton");
    assert!(Serving::of(&predictor(&named)).queue_proxy, "ONNX with runtime: goes to that runtime");
}
