//! A real `skiff-server` that cannot load its model exits non-zero and writes why to its
//! termination message file (`--termination-message-path`, Kubernetes' `terminationMessagePath`):
//! a text file refused by the model check before ONNX Runtime reads it, and a well-formed
//! `ModelProto` that ONNX Runtime refuses while loading.

mod common;

use std::process::Command;

use common::*;

/// `ir_version: 8`, a graph with one node of operator `NoSuchOp`, `opset_import {version: 17}`.
const UNKNOWN_OPERATOR: &[u8] = b"\x08\x08\x3a\x0f\x0a\x0a\x22\x08NoSuchOp\x12\x01g\x42\x02\x10\x11";

/// Runs the server on a folder whose `model.onnx` holds `model`; its exit code and termination message.
fn run_on(model: &[u8]) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("broken");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("model.onnx"), model).unwrap();
    let message = tmp.path().join("termination-log");
    let status = Command::new(env!("CARGO_BIN_EXE_skiff-server"))
        .arg("--model-dir")
        .arg(&dir)
        .args(["--http-port", "0", "--bind", "127.0.0.1", "--termination-message-path"])
        .arg(&message)
        .env("ORT_DYLIB_PATH", ort_dylib())
        .status()
        .unwrap();
    (status.code(), std::fs::read_to_string(&message).unwrap_or_default())
}

#[test]
fn a_model_that_does_not_load_leaves_its_reason() {
    let (code, message) = run_on(b"this is a text file\n");
    assert_eq!(code, Some(1));
    assert!(message.starts_with("cannot load model 'broken' from "), "{message}");
    assert!(
        message
            .ends_with("model.onnx: not an ONNX model: byte 0: 0x74 is ModelProto's field 14 with wire type 4, not 2"),
        "{message}"
    );

    let (code, message) = run_on(UNKNOWN_OPERATOR);
    assert_eq!(code, Some(1));
    assert!(message.starts_with("cannot load model 'broken' from ") && message.contains("onnxruntime"), "{message}");
}
