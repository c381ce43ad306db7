//! KServe's `sklearn-iris` sample (docs/samples/v1beta1/sklearn/v1/sklearn.yaml) under a real
//! `skiff up`, unchanged: its `sklearn:` shorthand selects the built-in `kserve-sklearnserver`
//! runtime, whose image `kserve/sklearnserver` runs as `python3 -m sklearnserver` from the
//! `kserve-runtimes` peer venv (`PEERS=kserve-runtimes bench/peers/setup.sh`: `kserve` from PyPI and
//! the stand-in module of bench/peers/kserve-runtimes) first on `PATH`. Its model comes from the
//! sample's own bucket path on the tests' fake-gcs-server (`STORAGE_EMULATOR_HOST`): a model.joblib
//! that tests/fixtures/sklearn_iris.py trains from scikit-learn's iris data set, as KServe's sample
//! does. A V1 predict with the sample's input (iris-input.json) through skiff up's router answers
//! what scikit-learn itself predicts with that file, and so does a V2 infer on the same server.
//! Its v2 variant is refused naming MLServer's image, which KServe's rules pick for it and which
//! has no built-in local command. Beside it, `xgboost:` and `lightgbm:` shorthands on `file://` boosters (the same script) run the
//! built-in map's `xgbserver` and `lgbserver`, and answer what the libraries predict.

mod common;
#[path = "../../fetch/tests/common/stores.rs"]
mod stores;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// The sample, as KServe's repository has it.
const SKLEARN_IRIS: &str = r#"apiVersion: "serving.kserve.io/v1beta1"
kind: "InferenceService"
metadata:
  name: "sklearn-iris"
spec:
  predictor:
    sklearn:
      storageUri: "gs://kfserving-examples/models/sklearn/1.0/model"
"#;

/// Its v2 variant (docs/samples/v1beta1/sklearn/v2/sklearn.yaml), as KServe's repository has it.
const SKLEARN_IRIS_V2: &str = r#"apiVersion: "serving.kserve.io/v1beta1"
kind: "InferenceService"
metadata:
  name: "sklearn-irisv2"
spec:
  predictor:
    sklearn:
      protocolVersion: v2
      storageUri: "gs://seldon-models/sklearn/iris"
"#;

/// The sample's request (iris-input.json).
const IRIS_INPUT: &str = r#"{"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]}"#;

fn venv() -> PathBuf {
    let venv = repo().join(".bench/kserve-runtimes-venv");
    assert!(
        venv.join("bin/python3").is_file(),
        "{} is missing: run `PEERS=kserve-runtimes bench/peers/setup.sh`",
        venv.display()
    );
    venv
}

/// Runs the fixture script with the venv's Python: trains `framework`'s model into `dir`, or
/// (with `--predict`) prints the library's predictions for `stdin`'s instances.
fn fixture(dir: &std::path::Path, framework: &str, predict: Option<&str>) -> String {
    let mut command = Command::new(venv().join("bin/python3"));
    command.arg(repo().join("tests/fixtures/sklearn_iris.py")).arg(dir).args(["--framework", framework]);
    if predict.is_some() {
        command.arg("--predict");
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("run sklearn_iris.py");
    child.stdin.take().unwrap().write_all(predict.unwrap_or_default().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "sklearn_iris.py failed");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kserves_sklearn_iris_sample_runs_unchanged_on_kserves_sklearnserver_and_the_boosters_on_theirs() {
    let trained = tempfile::tempdir().unwrap();
    fixture(trained.path(), "sklearn", None);
    let model = std::fs::read(trained.path().join("model.joblib")).unwrap();
    let expected: Value = serde_json::from_str(&fixture(trained.path(), "sklearn", Some(IRIS_INPUT))).unwrap();
    let classes = expected.as_array().unwrap();
    assert_eq!(classes.len(), 2, "one class per instance: {expected}");

    let gcs = stores::fake_gcs(&[("kfserving-examples", "models/sklearn/1.0/model/model.joblib", &model)]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sklearn.yaml"), SKLEARN_IRIS).unwrap();
    std::fs::write(dir.path().join("sklearn-v2.yaml"), SKLEARN_IRIS_V2).unwrap();
    let mut boosters = Vec::new();
    for framework in ["xgboost", "lightgbm"] {
        let model_dir = dir.path().join("models").join(framework);
        fixture(&model_dir, framework, None);
        let expected: Value = serde_json::from_str(&fixture(&model_dir, framework, Some(IRIS_INPUT))).unwrap();
        let manifest = SKLEARN_IRIS
            .replace("sklearn-iris", &format!("{framework}-iris"))
            .replace("sklearn:", &format!("{framework}:"))
            .replace("gs://kfserving-examples/models/sklearn/1.0/model", &format!("file://./models/{framework}"));
        std::fs::write(dir.path().join(format!("{framework}.yaml")), manifest).unwrap();
        boosters.push((framework, expected));
    }
    let cache = dir.path().join("cache");
    let path = format!("{}:{}", venv().join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let env = [("STORAGE_EMULATOR_HOST", gcs.url.as_str()), ("PATH", path.as_str())];
    let up = Up::start_with(dir.path(), "domain: example.com\n", &env, &["--model-cache", cache.to_str().unwrap()]);

    let ready =
        |s: &Value| s["services"].as_array().is_some_and(|v| v.len() == 3 && v.iter().all(|s| s["ready"] == true));
    let status = up.wait_for("the three services ready", Duration::from_secs(180), ready).await;
    // The v2 variant goes to kserve-mlserver as on KServe; MLServer has no built-in local command.
    let errors = status["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{status}");
    let refusal = errors[0].as_str().unwrap();
    assert!(
        refusal.contains(
            "sklearn-v2.yaml: spec.predictor.model.runtime: ClusterServingRuntime \"kserve-mlserver\": containers[0].command: \
             image \"docker.io/seldonio/mlserver:1.7.1\" is not in the image map"
        ),
        "{refusal}"
    );
    let services = status["services"].as_array().unwrap();
    let revision = &services.iter().find(|s| s["name"] == "sklearn-iris").unwrap()["revisions"][0];
    assert_eq!(revision["fetched"]["bytes"], model.len(), "the model came from the bucket: {revision}");

    let url = format!("http://{}/v1/models/sklearn-iris:predict", up.addr);
    let reply = send(Method::POST, &url, Bytes::from_static(IRIS_INPUT.as_bytes()), &[]).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.json(), json!({"predictions": expected}), "scikit-learn's own predictions");

    let rows: Vec<f64> = serde_json::from_str::<Value>(IRIS_INPUT).unwrap()["instances"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
        .collect();
    let v2 = json!({"inputs": [{"name": "input-0", "shape": [2, 4], "datatype": "FP64", "data": rows}]});
    let url = format!("http://{}/v2/models/sklearn-iris/infer", up.addr);
    let reply = send(Method::POST, &url, Bytes::from(v2.to_string()), &[]).await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.json()["outputs"][0]["data"], expected, "V2 on the same server");

    for (framework, expected) in boosters {
        let url = format!("http://{}/v1/models/{framework}-iris:predict", up.addr);
        let reply = send(Method::POST, &url, Bytes::from_static(IRIS_INPUT.as_bytes()), &[]).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{framework}: {:?}", reply.body);
        assert_eq!(reply.json(), json!({"predictions": expected}), "{framework}'s own predictions");
    }
}
