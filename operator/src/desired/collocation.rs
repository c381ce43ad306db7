//! KServe's collocation (0.15+): `containers` beside `model` put a `transformer-container` in the
//! model's pod, as KServe's predictor reconciler builds it. The model server (`skiff-server`, or
//! the runtime's container) listens on [`COLLOCATED_MODEL_PORT`] and declares no port; the
//! transformer container declares the pod's one port (Knative serves one) and the queue-proxy
//! fronts it. A `transformer-container` the runtime gives is merged with the InferenceService's
//! (its fields over the runtime's, KServe's `MergeRuntimeContainers`); the user's other
//! containers follow as sidecars.

use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::Value;
use skiff_api::isvc::PredictorSpec;
use skiff_api::runtime::SelectedRuntime;
use skiff_api::validate::TRANSFORMER_CONTAINER;

use super::queue_proxy::{QUEUE_PROXY, queue_proxy};
use super::{RevisionRef, SERVER_PORT, serving_ports};
use crate::platform::Platform;

/// The model server's port beside a transformer container.
pub(super) const COLLOCATED_MODEL_PORT: i32 = skiff_api::validate::COLLOCATED_MODEL_PORT as i32;

/// Whether `runtime` gives a `transformer-container` (KServe runs it beside the model even when
/// the InferenceService names no container).
pub(super) fn runtime_collocates(runtime: &SelectedRuntime) -> bool {
    runtime.spec.containers.iter().any(|c| c.name == TRANSFORMER_CONTAINER)
}

/// Adds the user's `containers` (at `at`) to the model's `pod` (its server first, the queue-proxy
/// last), and points the queue-proxy at the transformer container.
pub(super) fn collocate(
    containers: &[Value],
    revision: &RevisionRef,
    predictor: &PredictorSpec,
    platform: &Platform,
    pod: &mut PodSpec,
    at: &str,
) -> Result<(), String> {
    pod.containers.retain(|c| c.name != QUEUE_PROXY);
    pod.containers[0].ports = None;
    for (i, value) in containers.iter().enumerate() {
        let field = format!("{at}.containers[{i}]");
        let name = value.get("name").and_then(Value::as_str);
        match pod.containers.iter().position(|c| Some(c.name.as_str()) == name) {
            Some(j) if name == Some(TRANSFORMER_CONTAINER) => {
                let mut merged = serde_json::to_value(&pod.containers[j]).map_err(|e| format!("{field}: {e}"))?;
                if let (Some(base), Some(own)) = (merged.as_object_mut(), value.as_object()) {
                    base.extend(own.clone());
                }
                pod.containers[j] = serde_json::from_value(merged).map_err(|e| format!("{field}: {e}"))?;
            }
            _ => pod.containers.push(serde_json::from_value(value.clone()).map_err(|e| format!("{field}: {e}"))?),
        }
    }
    let transformer = pod
        .containers
        .iter_mut()
        .find(|c| c.name == TRANSFORMER_CONTAINER)
        .ok_or_else(|| format!("{at}: containers beside model must include {TRANSFORMER_CONTAINER}"))?;
    if transformer.ports.as_ref().is_none_or(Vec::is_empty) {
        transformer.ports = Some(serving_ports(SERVER_PORT));
    }
    let upstream = transformer.ports.as_ref().and_then(|p| p.first()).map_or(SERVER_PORT, |p| p.container_port);
    let proxy: Container = queue_proxy(upstream, revision, predictor, platform);
    pod.containers.push(proxy);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::desired::testing::*;

    fn names(pod: &serde_json::Value) -> Vec<String> {
        pod["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn a_transformer_container_beside_an_onnx_model_takes_the_traffic_and_reaches_skiff_server_on_8085() {
        let d = build(
            "    logger: {url: 'http://sink.ml/events'}\n    batcher: {maxBatchSize: 8}\n    model:\n      \
             modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n    containers:\n    \
             - name: transformer-container\n      image: kserve/image-transformer\n      args: \
             [--predictor_host=localhost:8085]\n    - name: sidecar\n      image: s\n",
        )
        .unwrap();
        let pod = pod_of(&d);
        assert_eq!(names(&pod), ["kserve-container", "transformer-container", "sidecar", "queue-proxy"]);
        let server = &pod["containers"][0];
        assert!(server.get("ports").is_none(), "Knative serves one port, the transformer's: {server}");
        assert!(strings(&server["args"]).windows(2).any(|w| w == ["--http-port", "8085"]), "{server}");
        assert_eq!(server["readinessProbe"]["httpGet"]["port"], 8085);
        let transformer = &pod["containers"][1];
        assert_eq!(transformer["ports"][0]["containerPort"], 8080);
        assert_eq!(
            strings(&transformer["args"]),
            ["--predictor_host=localhost:8085"],
            "the user's arguments as written"
        );
        let proxy = &pod["containers"][3];
        assert!(strings(&proxy["args"]).windows(2).any(|w| w == ["--upstream", "127.0.0.1:8080"]), "{proxy}");
        for flag in ["--logger-url", "--enable-batching"] {
            assert!(strings(&proxy["args"]).iter().any(|a| a == flag), "KServe's agent fronts the pod's port: {proxy}");
            assert!(!strings(&server["args"]).iter().any(|a| a == flag), "not the server behind: {server}");
        }
    }

    #[test]
    fn the_transformers_declared_port_is_the_one_the_queue_proxy_fronts() {
        let d = build(
            "    model:\n      modelFormat: {name: onnx}\n      storageUri: file:///models/iris\n    containers:\n    \
             - name: transformer-container\n      image: t\n      ports: [{containerPort: 9000}]\n",
        )
        .unwrap();
        let pod = pod_of(&d);
        assert_eq!(pod["containers"][1]["ports"][0]["containerPort"], 9000);
        assert!(strings(&pod["containers"][2]["args"]).windows(2).any(|w| w == ["--upstream", "127.0.0.1:9000"]));
    }

    #[test]
    fn in_custom_form_the_transformer_container_serves_beside_kserve_container() {
        let d = build(
            "    containers:\n    - name: kserve-container\n      image: pytorch/torchserve\n    - name: \
             transformer-container\n      image: t\n      args: [--predictor_host=localhost:8085]\n",
        )
        .unwrap();
        let pod = pod_of(&d);
        assert_eq!(names(&pod), ["kserve-container", "transformer-container", "queue-proxy"]);
        assert!(pod["containers"][0].get("ports").is_none(), "{pod}");
        assert_eq!(pod["containers"][1]["ports"][0]["containerPort"], 8080);
        assert!(strings(&pod["containers"][2]["args"]).windows(2).any(|w| w == ["--upstream", "127.0.0.1:8080"]));
    }
}
