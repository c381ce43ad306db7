//! KServe's autoscaler classes in `skiff up`, which runs the kpa class only: a real `skiff up`
//! refuses a manifest of the hpa class, one of KServe's Standard mode (whose default class is hpa)
//! and one of the keda class, each naming the annotation, and serves the same manifest with
//! `serving.kserve.io/autoscalerClass: kpa` (Standard mode and `scaleMetric: concurrency` beside it).

mod common;

use std::time::Duration;

use common::*;
use http::StatusCode;

/// `manifest` with `annotations` (one `key: value` per line) under `metadata`.
fn annotated(name: &str, annotations: &str, extra: &str) -> String {
    let lines: String = annotations.lines().map(|l| format!("    {l}\n")).collect();
    manifest(name, "iris", extra).replacen(
        &format!("  name: {name}\n"),
        &format!("  name: {name}\n  annotations:\n{lines}"),
        1,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skiff_up_refuses_the_classes_it_does_not_run_naming_the_annotation() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    let write = |file: &str, text: String| std::fs::write(path.join(file), text).unwrap();
    write("hpa.yaml", annotated("hpa", "serving.kserve.io/autoscalerClass: hpa", "scaleMetric: cpu\nscaleTarget: 80"));
    write("standard.yaml", annotated("standard", "serving.kserve.io/deploymentMode: Standard", ""));
    write(
        "keda.yaml",
        annotated(
            "keda",
            "serving.kserve.io/autoscalerClass: keda",
            "autoScaling:\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization}}",
        ),
    );
    write(
        "kpa.yaml",
        annotated(
            "kpa",
            "serving.kserve.io/deploymentMode: Standard\nserving.kserve.io/autoscalerClass: kpa",
            "scaleMetric: concurrency",
        ),
    );
    let up = Up::start(path, "");
    let status = up
        .wait_for("kpa ready and three refusals", Duration::from_secs(60), |s| {
            let ready =
                s["services"].as_array().is_some_and(|v| v.iter().any(|s| s["name"] == "kpa" && s["ready"] == true));
            ready && s["errors"].as_array().is_some_and(|e| e.len() == 3)
        })
        .await;
    let dir = path.display();
    let errors: Vec<&str> = status["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    let expected = [
        format!("{dir}/hpa.yaml: metadata.annotations[serving.kserve.io/autoscalerClass]: hpa is not run by skiff up"),
        format!(
            "{dir}/keda.yaml: metadata.annotations[serving.kserve.io/autoscalerClass]: keda is not run by skiff up"
        ),
        format!(
            "{dir}/standard.yaml: metadata.annotations[serving.kserve.io/deploymentMode]: \"Standard\" means the hpa \
             class, which is not run by skiff up"
        ),
    ];
    for (error, expected) in errors.iter().zip(&expected) {
        assert!(error.starts_with(expected.as_str()), "{error}\n  expected {expected}");
        assert!(error.contains("Set serving.kserve.io/autoscalerClass: kpa to run it here"), "{error}");
    }
    assert_eq!(errors.len(), expected.len());
    assert_eq!(up.infer("kpa").await.unwrap().status, StatusCode::OK, "the kpa class is served");
    assert!(up.stop().success());
}
