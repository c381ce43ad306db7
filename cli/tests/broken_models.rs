//! Broken models under a real `skiff up`: each says why it does not serve, in KServe's terms
//! (`ModelLoadFailed` with the error) in `skiff get`, `skiff get -o json`, the web app and the
//! log, and none is started again in a tight loop. The files are real: an empty `model.onnx`, the
//! iris model cut in half, a text file, and a symlink to a file that cannot be read (the tests run
//! as root, which reads any file whatever its mode, so the link leads to a write-only sysfs file,
//! `/sys/bus/pci/rescan`, which refuses even root a read), each refused before a replica starts;
//! and a well-formed `ModelProto` whose operator ONNX Runtime does not know, which starts and fails
//! to load, so that its reason comes back through the server's termination message and its
//! restarts back off. A dangling symlink and a symlink to a folder are refused with the manifest
//! (`skiff get`'s `refused:` lines). A good model in the same folder keeps serving.

mod common;

use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use serde_json::Value;

/// Back-off from 500 ms doubling to 2 s: the kubelet's rule with a shorter setting.
const CONFIG: &str = "replicas:\n  restartBackoff: 500ms\n  maxRestartBackoff: 2s\n";

/// `ir_version: 8`, a graph with one node of operator `NoSuchOp`, `opset_import {version: 17}`.
const UNKNOWN_OPERATOR: &[u8] = b"\x08\x08\x3a\x0f\x0a\x0a\x22\x08NoSuchOp\x12\x01g\x42\x02\x10\x11";

/// Files root cannot read: write-only sysfs attributes.
const UNREADABLE: &[&str] = &["/sys/bus/pci/rescan", "/sys/bus/nd/drivers_probe", "/sys/class/zram-control/hot_remove"];

/// The broken models refused before a replica starts: service name and what its reason says.
fn broken(dir: &std::path::Path) -> Vec<(&'static str, &'static str)> {
    let model = |name: &str| {
        let folder = dir.join("models").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        folder.join("model.onnx")
    };
    let iris = std::fs::read(repo().join("examples/models/iris/model.onnx")).unwrap();
    std::fs::write(model("empty"), b"").unwrap();
    std::fs::write(model("truncated"), &iris[..iris.len() / 2]).unwrap();
    std::fs::write(model("text"), b"this is a text file, not a model\n").unwrap();
    let unreadable = UNREADABLE
        .iter()
        .find(|path| std::path::Path::new(path).is_file() && std::fs::File::open(path).is_err())
        .expect("a write-only sysfs file");
    std::os::unix::fs::symlink(unreadable, model("unreadable")).unwrap();
    vec![
        ("empty", "the file is empty"),
        ("truncated", "it is truncated"),
        ("text", "not an ONNX model: byte 0: 0x74 is ModelProto's field 14 with wire type 4, not 2"),
        ("unreadable", "cannot open it: Permission denied"),
    ]
}

/// Links that do not lead to a file, refused with their manifest: service name.
fn not_files(dir: &std::path::Path) -> [&'static str; 2] {
    for (name, target) in [("dangling", dir.join("nowhere/model.onnx")), ("folder", dir.join("models"))] {
        let folder = dir.join("models").join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(target, folder.join("model.onnx")).unwrap();
    }
    ["dangling", "folder"]
}

fn service<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    status["services"].as_array()?.iter().find(|s| s["name"] == name)
}

fn revision<'a>(status: &'a Value, name: &str) -> Option<&'a Value> {
    service(status, name)?["revisions"].get(0)
}

fn skiff_get(up: &Up, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["get", "--admin-port", &up.admin.port().to_string()])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "skiff get: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

/// The web app's events of `name`, oldest first: (reason, message).
async fn events(up: &Up, name: &str) -> Vec<(String, String)> {
    up.events(name).await.iter().rev().map(reason_and_message).collect()
}

fn back_offs(events: &[(String, String)]) -> Vec<String> {
    events.iter().filter(|(reason, _)| reason == "BackOff").map(|(_, message)| message.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_models_say_why_and_back_off_while_a_good_one_serves() {
    let dir = folder(&["iris"]);
    let cases = broken(dir.path());
    let refused = not_files(dir.path());
    std::fs::create_dir_all(dir.path().join("models/unknownop")).unwrap();
    std::fs::write(dir.path().join("models/unknownop/model.onnx"), UNKNOWN_OPERATOR).unwrap();
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    for name in cases.iter().map(|(n, _)| *n).chain(refused).chain(["unknownop"]) {
        std::fs::write(dir.path().join(format!("{name}.yaml")), manifest(name, name, "minReplicas: 1")).unwrap();
    }
    let up = Up::start(dir.path(), CONFIG);

    // Each refused model: ModelLoadFailed with its reason, refused again at once, then after each
    // back-off (500 ms, then 1 s), and never started.
    let status = up
        .wait_for("every broken model refused twice", Duration::from_secs(60), |s| {
            cases.iter().all(|(name, _)| revision(s, name).is_some_and(|r| r["backOffMs"].as_u64() >= Some(1000)))
        })
        .await;
    for (name, why) in &cases {
        let r = revision(&status, name).unwrap();
        let failure = &r["lastFailureInfo"];
        assert_eq!(failure["reason"], "ModelLoadFailed", "{name}: {r:#}");
        let message = failure["message"].as_str().unwrap();
        assert!(message.contains(why) && message.contains(&format!("models/{name}/model.onnx")), "{name}: {message}");
        assert_eq!((r["spawns"].as_u64(), r["restarts"].as_u64(), r["ready"].as_u64()), (Some(0), Some(0), Some(0)));
        assert_eq!(service(&status, name).unwrap()["ready"], false);
        let events = events(&up, name).await;
        assert_eq!(
            back_offs(&events)[..2],
            ["back-off 500ms restarting failed replica", "back-off 1000ms restarting failed replica"],
            "{name}: {events:?}"
        );
        let failures: Vec<_> = events.iter().filter(|(reason, _)| reason == "ModelLoadFailed").collect();
        assert_eq!(failures.len(), 1, "the same failure is one event: {events:?}");
        assert_eq!(failures[0].1, message);
    }

    // The model ONNX Runtime refuses starts, fails to load, and says why through its termination
    // message; each start waits twice as long as the one before, up to 2 s.
    let status = up
        .wait_for("unknownop backed off to the cap", Duration::from_secs(90), |s| {
            revision(s, "unknownop").is_some_and(|r| r["restarts"].as_u64() >= Some(3) && r["backOffMs"] == 2000)
        })
        .await;
    let r = revision(&status, "unknownop").unwrap();
    let failure = &r["lastFailureInfo"];
    let message = failure["message"].as_str().unwrap();
    assert_eq!(failure["reason"], "ModelLoadFailed", "{r:#}");
    assert!(message.starts_with("cannot load model 'unknownop' from ") && message.contains("onnxruntime"), "{message}");
    assert_eq!(failure["exitCode"], 1);
    let events = events(&up, "unknownop").await;
    let waits = back_offs(&events);
    assert_eq!(
        waits[..3],
        [
            "back-off 500ms restarting failed replica",
            "back-off 1000ms restarting failed replica",
            "back-off 2000ms restarting failed replica"
        ],
        "{events:?}"
    );
    let spawns = r["spawns"].as_u64().unwrap();
    let restarts = r["restarts"].as_u64().unwrap();
    assert!(
        spawns == restarts || spawns == restarts + 1,
        "one start per back-off: {spawns} starts, {restarts} failures"
    );

    // skiff get: the reason column and the message line; -o json: lastFailureInfo.
    let table = skiff_get(&up, &[]);
    for name in cases.iter().map(|(n, _)| *n).chain(["unknownop"]) {
        let row = table.lines().find(|l| l.split_whitespace().take(2).eq(["default", name]));
        let row = row.unwrap_or_else(|| panic!("{table}"));
        assert!(row.ends_with("ModelLoadFailed"), "{row}");
        let line = format!("{name}-predictor-00001: ModelLoadFailed: cannot load model '{name}'");
        assert!(table.lines().any(|l| l.starts_with(&line)), "no {line:?} in\n{table}");
    }
    for name in refused {
        let line =
            format!("refused: {}: spec.predictor.model.storageUri:", dir.path().join(format!("{name}.yaml")).display());
        assert!(table.lines().any(|l| l.starts_with(&line)), "no {line:?} in\n{table}");
    }
    let json: Value = serde_json::from_str(&skiff_get(&up, &["-o", "json"])).unwrap();
    for name in cases.iter().map(|(n, _)| *n).chain(["unknownop"]) {
        assert_eq!(revision(&json, name).unwrap()["lastFailureInfo"]["reason"], "ModelLoadFailed", "{name}");
    }

    // The web app: PredictorReady False with the reason and the message.
    let url = format!("http://{}/models/api/namespaces/default/inferenceservices/empty", up.admin);
    let view = send(Method::GET, &url, Bytes::new(), &[]).await.unwrap().json();
    let condition = view["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "PredictorReady").unwrap();
    assert_eq!((condition["status"].as_str(), condition["reason"].as_str()), (Some("False"), Some("ModelLoadFailed")));
    assert!(condition["message"].as_str().unwrap().contains("the file is empty"), "{condition}");

    // The log, at warn.
    let logged: Vec<String> = up.logs.try_iter().collect();
    assert!(
        logged.iter().any(|l| l.contains("WARN")
            && l.contains("ModelLoadFailed")
            && l.contains("cannot load model 'unknownop'")),
        "no warning with the reason in {} log lines",
        logged.len()
    );

    // The good model serves throughout.
    assert!(revision(&status, "iris").unwrap()["lastFailureInfo"].is_null());
    assert_eq!(up.infer("iris").await.unwrap().status, StatusCode::OK);

    // A fixed model serves once its back-off is over, and its failure is gone.
    std::fs::copy(repo().join("examples/models/iris/model.onnx"), dir.path().join("models/empty/model.onnx")).unwrap();
    let status = up
        .wait_for("the fixed model ready", Duration::from_secs(60), |s| {
            revision(s, "empty").is_some_and(|r| r["ready"] == 1)
        })
        .await;
    assert!(revision(&status, "empty").unwrap()["lastFailureInfo"].is_null());
    assert_eq!(up.infer("empty").await.unwrap().status, StatusCode::OK);
    assert!(up.stop().success());
}
