//! The models' cached forms (issue 37) through the real binary and real ONNX models: written once
//! after the first load, loaded in place after that with the same answers, and rebuilt from the
//! ONNX file when the entry is corrupt, refused by ONNX Runtime, for another runtime or half
//! written.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const MODELS: [&str; 3] = ["iris", "mlp", "adder"];

/// A folder of the fixture models and an empty cache folder.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let models = tmp.path().join("models");
    for name in MODELS {
        std::fs::create_dir_all(models.join(name)).unwrap();
        std::fs::copy(repo().join(format!("examples/models/{name}/model.onnx")), models.join(name).join("model.onnx"))
            .unwrap();
    }
    let cache = tmp.path().join("ort");
    (tmp, models, cache)
}

fn start(models: &Path, cache: &str) -> Server {
    Server::start(&["--model-dir", &models.display().to_string(), "--workers", "2", "--ort-cache-dir", cache])
}

/// Log lines (as JSON) until `done` holds for the ones received, or panics after 60 s.
fn logs_until(server: &Server, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        seen.extend(server.drain_logs().iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
        if done(&seen) {
            return seen;
        }
        assert!(Instant::now() < deadline, "timed out; logs: {seen:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn messages<'a>(logs: &'a [Value], message: &str) -> Vec<&'a Value> {
    logs.iter().filter(|l| l["fields"]["message"] == message).collect()
}

/// Each model's `from` in its `model loaded` line, by model.
fn loaded_from(logs: &[Value]) -> Vec<(String, String)> {
    let mut from: Vec<(String, String)> = messages(logs, "model loaded")
        .iter()
        .map(|l| (l["fields"]["model"].as_str().unwrap().to_owned(), l["fields"]["from"].as_str().unwrap().to_owned()))
        .collect();
    from.sort();
    from
}

/// Waits for every model's load (and, when `written`, every cached form written); returns the logs.
fn wait_loaded(server: &Server, written: bool) -> Vec<Value> {
    logs_until(server, |logs| {
        messages(logs, "model loaded").len() == MODELS.len()
            && (!written || messages(logs, "cached form written").len() == MODELS.len())
    })
}

/// Every fixture case of every model answers as its expectation file says.
async fn answers_match(server: &Server) {
    server.wait_ready().await;
    for name in MODELS {
        for case in expectations(name)["cases"].as_array().unwrap() {
            let request = serde_json::json!({ "inputs": case["inputs"] });
            let (status, body) = post(&server.url(&format!("/v2/models/{name}/infer")), &request).await;
            assert_eq!(status, http::StatusCode::OK, "{name}: {body}");
            assert_outputs_match(&body["outputs"], &case["outputs"], &format!("{name} {}", case["name"]));
        }
    }
}

fn entries(cache: &Path, extension: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache)
        .map(|d| d.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == extension)).collect())
        .unwrap_or_default();
    found.sort();
    found
}

fn all_from(from: &str) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = MODELS.iter().map(|m| ((*m).to_owned(), from.to_owned())).collect();
    all.sort();
    all
}

#[tokio::test]
async fn built_once_then_loaded_in_place_with_the_same_answers() {
    let (_tmp, models, cache) = setup();
    let dir = cache.display().to_string();

    // First start: ONNX files, then the cached forms are written after readiness.
    let server = start(&models, &dir);
    answers_match(&server).await;
    let logs = wait_loaded(&server, true);
    assert!(loaded_from(&logs).iter().all(|(_, from)| from.starts_with("OnnxThenCache")), "{logs:#?}");
    drop(server);
    let written = entries(&cache, "ort");
    assert_eq!(written.len(), MODELS.len());
    let stamps: Vec<_> = written.iter().map(|p| std::fs::metadata(p).unwrap().modified().unwrap()).collect();

    // Second and third starts: from the cached forms, nothing written again, the same answers.
    for _ in 0..2 {
        let server = start(&models, &dir);
        answers_match(&server).await;
        let logs = wait_loaded(&server, false);
        assert_eq!(loaded_from(&logs), all_from("Cached"), "{logs:#?}");
        std::thread::sleep(Duration::from_millis(300));
        let later: Vec<Value> =
            server.drain_logs().iter().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
        assert!(messages(&later, "cached form written").is_empty(), "{later:#?}");
        drop(server);
    }
    let again: Vec<_> =
        entries(&cache, "ort").iter().map(|p| std::fs::metadata(p).unwrap().modified().unwrap()).collect();
    assert_eq!(again, stamps, "reused, not rewritten");

    // Off: the ONNX files, nothing read or written.
    let server = start(&models, "off");
    answers_match(&server).await;
    assert_eq!(loaded_from(&wait_loaded(&server, false)), all_from("Onnx"));
}

#[tokio::test]
async fn a_corrupt_refused_foreign_or_half_written_entry_is_rebuilt_from_the_onnx_file() {
    let (_tmp, models, cache) = setup();
    let dir = cache.display().to_string();
    let server = start(&models, &dir);
    wait_loaded(&server, true);
    drop(server);
    let (orts, metas) = (entries(&cache, "ort"), entries(&cache, "json"));
    assert_eq!((orts.len(), metas.len()), (3, 3));

    // Model 0: a flipped byte (the CRC-32 catches it). Model 1: garbage whose meta was updated to
    // match (ONNX Runtime refuses it). Model 2: a meta for another runtime.
    let mut bytes = std::fs::read(&orts[0]).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&orts[0], &bytes).unwrap();

    let garbage = vec![7u8; 4096];
    std::fs::write(&orts[1], &garbage).unwrap();
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&metas[1]).unwrap()).unwrap();
    meta["len"] = 4096.into();
    meta["crc32"] = crc32(&garbage).into();
    std::fs::write(&metas[1], serde_json::to_vec(&meta).unwrap()).unwrap();

    let mut meta: Value = serde_json::from_slice(&std::fs::read(&metas[2]).unwrap()).unwrap();
    meta["key"]["runtime"] = "1.0.0+older".into();
    std::fs::write(&metas[2], serde_json::to_vec(&meta).unwrap()).unwrap();

    // A half-written file of a build that was killed, as the next start finds it.
    std::fs::write(cache.join(".tmp-999999999-0000000000000000.ort"), b"ORT by").unwrap();

    let server = start(&models, &dir);
    answers_match(&server).await;
    let logs = wait_loaded(&server, true);
    let reasons: Vec<String> = messages(&logs, "loading the ONNX file: no valid cached form")
        .iter()
        .map(|l| l["fields"]["reason"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(reasons.len(), 3, "{logs:#?}");
    assert!(reasons.iter().any(|r| r.contains("CRC-32")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("the runtime refused the cached form")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("for another model or runtime")), "{reasons:?}");
    drop(server);
    assert!(
        !cache.join(".tmp-999999999-0000000000000000.ort").exists(),
        "a dead process's temporary file is collected"
    );

    // Rebuilt: the next start loads every model in place again.
    let server = start(&models, &dir);
    answers_match(&server).await;
    assert_eq!(loaded_from(&wait_loaded(&server, false)), all_from("Cached"));
    assert_eq!(entries(&cache, "ort").len(), 3);
}

/// CRC-32 (IEEE), as the cache's meta records it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[tokio::test]
async fn a_replica_stopped_right_after_its_first_start_still_leaves_its_cached_forms() {
    let (_tmp, models, cache) = setup();
    let mut server = start(&models, &cache.display().to_string());
    server.wait_ready().await;
    // Scaled to zero at once: SIGTERM waits for the forms being finished.
    server.terminate();
    assert!(server.wait_exit(Duration::from_secs(30)).success());
    assert_eq!((entries(&cache, "ort").len(), entries(&cache, "json").len()), (3, 3));
    let server = start(&models, &cache.display().to_string());
    answers_match(&server).await;
    assert_eq!(loaded_from(&wait_loaded(&server, false)), all_from("Cached"));
}
