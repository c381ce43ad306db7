//! The queue-proxy sidecar (Knative's queue-proxy, Skiff's `skiff-activator queue-proxy`), in
//! front of every container Skiff did not build: a ServingRuntime's or the user's.

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{Container, ContainerPort, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::json;
use skiff_api::isvc::PredictorSpec;
use skiff_api::serving::{AdmissionArgs, QueueProxyArgs, batching, logger};

use super::{RevisionRef, drain};
use crate::platform::Platform;

/// The queue-proxy's port in a custom container's pod (Knative's).
pub const QUEUE_PROXY_PORT: i32 = 8012;
/// The queue-proxy sidecar's container name (Knative's).
pub const QUEUE_PROXY: &str = "queue-proxy";

/// The queue-proxy sidecar in front of a custom container on `upstream`: it enforces
/// `containerConcurrency`, exposes the in-flight gauge the autoscaler scrapes, answers the
/// revision's Service on [`QUEUE_PROXY_PORT`], and is KServe's agent for the container: the
/// request logger (`predictor.logger`) and the batcher (`predictor.batcher`), with the flags
/// `skiff-server` gets for them.
pub(super) fn queue_proxy(
    upstream: i32,
    revision: &RevisionRef,
    predictor: &PredictorSpec,
    platform: &Platform,
) -> Container {
    let serving = revision.serving;
    let args = QueueProxyArgs {
        port: QUEUE_PROXY_PORT as u16,
        upstream: SocketAddr::from(([127, 0, 0, 1], upstream as u16)),
        admission: AdmissionArgs { container_concurrency: serving.per_replica_limit(), max_queued: None },
        timeout_secs: serving.timeout_secs,
        drain: drain(),
        batching: batching(predictor),
        logger: logger(predictor, revision.served(), &platform.logger_sinks),
        ..QueueProxyArgs::default()
    };
    Container {
        name: QUEUE_PROXY.into(),
        image: Some(platform.queue_proxy_image.clone()),
        args: Some(args.to_args()),
        ports: Some(vec![ContainerPort {
            name: Some("queue-port".into()),
            container_port: QUEUE_PROXY_PORT,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/healthz".into()),
                port: IntOrString::Int(QUEUE_PROXY_PORT),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(1),
            failure_threshold: Some(3),
            ..Probe::default()
        }),
        security_context: serde_json::from_value(json!({
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]},
        }))
        .ok(),
        ..Container::default()
    }
}

#[cfg(test)]
mod tests {
    use skiff_api::settings::RevisionSettings;

    use crate::desired::testing::*;
    use crate::desired::{QUEUE_PROXY_PORT, deployment};
    use crate::platform::Platform;

    #[test]
    fn a_custom_container_gets_the_queue_proxy_and_its_service_targets_it() {
        let mut revision = revision();
        revision.serving = RevisionSettings {
            container_concurrency: 4,
            timeout_secs: 60,
            queue_proxy: true,
            ..RevisionSettings::default()
        };
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

    #[test]
    fn the_queue_proxy_gets_the_logger_and_the_batcher_of_a_custom_container() {
        let mut revision = revision();
        revision.serving = RevisionSettings {
            container_concurrency: 0,
            timeout_secs: 60,
            queue_proxy: true,
            ..RevisionSettings::default()
        };
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
}
