//! The shape of a pod that serves an ONNX model itself: `skiff-server` on the model, with
//! KServe's container fields of `spec.predictor.model`, its probes, and why a model did not load
//! in the pod's termination message.

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use skiff_api::isvc::{ModelSpec, PredictorSpec};
use skiff_api::runtime::uses_embedded_server;
use skiff_api::serving::{ServerArgs, ServerProcess, admission, batching, logger};

use super::{CONTAINER_NAME, RevisionRef, drain, from_fields, security, serving_ports, storage};
use crate::platform::Platform;

/// Container fields KServe accepts in `spec.predictor.model`, passed to the server's container.
const MODEL_CONTAINER_FIELDS: [&str; 6] =
    ["resources", "env", "envFrom", "securityContext", "imagePullPolicy", "volumeMounts"];

/// `skiff-server` on the model, mounted at the platform's model folder, listening on `port`.
pub(super) fn model_server(
    revision: &RevisionRef,
    model: &ModelSpec,
    predictor: &PredictorSpec,
    platform: &Platform,
    port: i32,
    pod: &mut PodSpec,
) -> Result<(), String> {
    if !uses_embedded_server(model) {
        return Err(format!(
            "spec.predictor.model.modelFormat.name: skiff-server serves onnx models, not {:?} (a ServingRuntime \
             serves other formats)",
            model.model_format.name
        ));
    }
    let dir = platform.model_dir.clone();
    let mut container: Container = from_fields(&model.other, &MODEL_CONTAINER_FIELDS, "spec.predictor.model")?;
    container.name = CONTAINER_NAME.into();
    container.image = Some(platform.server_image.clone());
    let args = ServerArgs {
        admission: admission(predictor),
        batching: batching(predictor),
        logger: logger(predictor, revision.served(), &platform.logger_sinks),
        drain: drain(),
        // Why a model did not load reaches the pod's lastState.terminated.message (KServe reads it
        // as ModelLoadFailed); the log's end stands in when the server could not write it.
        process: ServerProcess {
            termination_message_path: Some(TERMINATION_MESSAGE_PATH.to_owned()),
            ..ServerProcess::default()
        },
        ..ServerArgs::new(&revision.service, &dir, port as u16)
    };
    container.args = Some(args.to_args());
    container.termination_message_path = Some(TERMINATION_MESSAGE_PATH.into());
    container.termination_message_policy = Some("FallbackToLogsOnError".into());
    container.ports = Some(serving_ports(port));
    container.readiness_probe = Some(probe("/v2/health/ready", port, 1, 3));
    container.liveness_probe = Some(probe("/v2/health/live", port, 10, 3));
    storage::provision_model(model, &dir, platform, pod, &mut container)?;
    // After the model's mount: a runtime that binds mounts in order resolves the model's host path
    // before `/tmp` is covered.
    security::read_only_root(&mut container).map_err(|e| format!("spec.predictor.model.{e}"))?;
    pod.containers = vec![container];
    Ok(())
}

/// Where `skiff-server` writes why it stopped: Kubernetes' default `terminationMessagePath`.
const TERMINATION_MESSAGE_PATH: &str = "/dev/termination-log";

fn probe(path: &str, port: i32, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(port),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::desired::storage::MODEL_VOLUME;
    use crate::desired::testing::*;

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
                "--drain-delay-secs",
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
    fn batching_flags_follow_the_batcher() {
        let d = build(&format!("{MODEL}    batcher: {{maxBatchSize: 16, maxLatency: 20}}\n")).unwrap();
        let args = pod_of(&d)["containers"][0]["args"].clone();
        let args: Vec<&str> = args.as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        let batching = ["--enable-batching", "--max-batch-size", "16", "--max-latency-ms", "20"];
        assert!(args.windows(batching.len()).any(|w| w == batching), "{args:?}");
    }
}
