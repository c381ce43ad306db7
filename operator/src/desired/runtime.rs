//! The shape of a pod a KServe ServingRuntime serves: the runtime's containers as both modes build
//! them ([`skiff_api::runtime::container::runtime_containers`]: the model's container fields merged
//! over its serving container as KServe merges them, KServe's placeholders replaced), the model
//! provided at [`RUNTIME_MODEL_DIR`], and the queue-proxy in front.

use k8s_openapi::api::core::v1::{EnvVar, PodSpec};
use skiff_api::isvc::{ModelSpec, PredictorSpec};
use skiff_api::runtime::SelectedRuntime;
use skiff_api::runtime::container::{Served, runtime_containers};

use super::{RevisionRef, queue_proxy::queue_proxy, serving_ports, storage::provision_model};
use crate::platform::Platform;

pub use skiff_api::runtime::container::RUNTIME_MODEL_DIR;

/// The container of the ServingRuntime chosen for the model (KServe's predictor for a runtime):
/// the runtime's containers for the model ([`runtime_containers`]: `kserve-container`, else the
/// first, serves, with the model's own container fields laid over it and KServe's placeholders
/// replaced); the model is provided at [`RUNTIME_MODEL_DIR`] as for `skiff-server`
/// ([`provision_model`]) when it names a `storageUri` (without one, as on KServe, the runtime fetches
/// the model itself, e.g. Hugging Face's `--model_id`, and the pod gets no storage initializer); `PORT` is set to the port it serves on (its first declared port, else
/// 8080) unless given; the runtime's other containers follow it, and the queue-proxy fronts it
/// (concurrency, the in-flight gauge the autoscaler reads, the logger and the batcher), as for a
/// custom container. The runtime's image is not Skiff's, so its root file system stays writable, as
/// a custom container's does.
pub(super) fn runtime_server(
    revision: &RevisionRef,
    model: &ModelSpec,
    predictor: &PredictorSpec,
    runtime: &SelectedRuntime,
    platform: &Platform,
    port: i32,
    pod: &mut PodSpec,
) -> Result<(), String> {
    let at = format!("{} {:?}", runtime.kind, runtime.name);
    let served = Served { name: &revision.service, namespace: &revision.namespace };
    let mut containers = runtime_containers(runtime.name, runtime.spec, model, served)
        .map_err(|e| format!("spec.predictor.model.runtime: {at}: {e}"))?;
    let serving = &mut containers[0];
    if serving.ports.as_ref().is_none_or(Vec::is_empty) {
        serving.ports = Some(serving_ports(port));
    }
    let upstream = serving.ports.as_ref().and_then(|p| p.first()).map_or(port, |p| p.container_port);
    let env = serving.env.get_or_insert_with(Vec::new);
    if !env.iter().any(|v| v.name == "PORT") {
        env.push(EnvVar { name: "PORT".into(), value: Some(upstream.to_string()), ..EnvVar::default() });
    }
    if model.storage_uri.as_deref().is_some_and(|uri| !uri.is_empty()) {
        provision_model(model, RUNTIME_MODEL_DIR, platform, pod, serving)?;
    }
    containers.push(queue_proxy(upstream, revision, predictor, platform));
    pod.containers = containers;
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;
    use skiff_api::settings::RevisionSettings;

    use crate::desired::storage::MODEL_VOLUME;
    use crate::desired::testing::*;
    use crate::desired::{QUEUE_PROXY_PORT, deployment};
    use crate::platform::Platform;

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
        revision.serving = RevisionSettings::of(&predictor);
        deployment(&revision, &owner(), &predictor, &record(), Some(0), &Platform::default(), Some(&selected))
    }

    #[test]
    fn a_runtimes_transformer_container_is_collocated_and_merged_with_the_inference_services() {
        let runtime = cluster_runtime(json!({
            "supportedModelFormats": [{"name": "sklearn", "autoSelect": true}],
            "containers": [
                {"name": "kserve-container", "image": "torchserve:1"},
                {
                    "name": "transformer-container",
                    "image": "kserve/image-transformer",
                    "args": ["--predictor_host=localhost:8085"],
                    "resources": {"limits": {"cpu": "1"}},
                },
            ],
        }));
        let model = "    model:\n      modelFormat: {name: sklearn}\n      storageUri: file:///models/sum\n";
        let pod = pod_of(&build_on_runtime(model, &runtime).unwrap());
        let names: Vec<&str> =
            pod["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["kserve-container", "transformer-container", "queue-proxy"], "with no containers given");
        let server = &pod["containers"][0];
        assert!(server.get("ports").is_none(), "{server}");
        assert!(server["env"].as_array().unwrap().iter().any(|e| e["name"] == "PORT" && e["value"] == "8085"));
        let given = format!(
            "{model}    containers:\n    - name: transformer-container\n      image: kserve/image-transformer\n      \
             resources: {{limits: {{cpu: '2'}}}}\n"
        );
        let pod = pod_of(&build_on_runtime(&given, &runtime).unwrap());
        let transformer = &pod["containers"][1];
        assert_eq!(transformer["resources"]["limits"]["cpu"], "2", "the InferenceService's fields win");
        assert_eq!(strings(&transformer["args"]), ["--predictor_host=localhost:8085"], "the runtime's are kept");
        assert_eq!(transformer["ports"][0]["containerPort"], 8080);
        assert!(strings(&pod["containers"][2]["args"]).windows(2).any(|w| w == ["--upstream", "127.0.0.1:8080"]));
    }

    #[test]
    fn a_runtime_serves_a_model_skiff_server_does_not_behind_the_queue_proxy() {
        let runtime = sk_runtime();
        let d = build_on_runtime(SKLEARN, &runtime).unwrap();
        let pod = pod_of(&d);
        let names: Vec<&str> =
            pod["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
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
        assert_eq!(
            init["args"],
            json!([
                "gs://bucket/sum",
                "/mnt/models",
                "--node-cache",
                "http://skiff-model-cache.skiff-node.svc.cluster.local:8095"
            ])
        );
        assert_eq!(pod["volumes"][1], json!({"name": MODEL_VOLUME, "emptyDir": {}}));
        assert_eq!(pod["containers"][0]["volumeMounts"][0]["mountPath"], "/mnt/models");

        let d = build_on_runtime(&SKLEARN.replace("file:///models/sum", "pvc://models/sum"), &runtime).unwrap();
        assert_eq!(pod_of(&d)["containers"][0]["volumeMounts"][0]["subPath"], "sum");
    }

    #[test]
    fn a_runtime_model_without_a_storage_uri_fetches_it_itself() {
        let runtime = sk_runtime();
        let d = build_on_runtime(&SKLEARN.replace("      storageUri: file:///models/sum\n", ""), &runtime).unwrap();
        let pod = pod_of(&d);
        assert!(pod.get("initContainers").is_none(), "no storage initializer: {pod}");
        assert!(pod["containers"][0].get("volumeMounts").is_none(), "no model volume: {pod}");
        assert_eq!(pod["volumes"], json!([{"name": "cache", "emptyDir": {}}]), "the runtime's volumes only");
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
        assert!(
            refused.unwrap_err().starts_with("spec.predictor.model.storageUri:"),
            "the platform's storage rules hold"
        );
    }
}
