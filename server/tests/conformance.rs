//! Outside clients against the real server, every output compared with ONNX Runtime's:
//! - KServe's own Python clients (`kserve` from PyPI: `InferenceGRPCClient`, typed and raw
//!   contents, all six methods; `InferenceRESTClient` with `binary_data=True`), compared in Python
//!   (`tests/conformance/kserve_clients.py`);
//! - NVIDIA's Triton clients (`tritonclient` from PyPI: HTTP and gRPC, sync and asyncio, gRPC
//!   streaming), compared with the expected files (`tests/conformance/triton_clients.py`).
//!
//! The clients live in the venvs `bench/peers/setup.sh` makes (`PEERS=kserve`, `PEERS=triton`;
//! `scripts/test.sh` runs it), or the Pythons named by `SKIFF_KSERVE_PYTHON` and
//! `SKIFF_TRITON_PYTHON`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// The Python of peer `peer`'s venv, or the one `variable` names; a clear failure when missing.
fn peer_python(peer: &str, variable: &str) -> PathBuf {
    let python =
        std::env::var_os(variable).map_or_else(|| repo().join(format!(".bench/{peer}-venv/bin/python")), PathBuf::from);
    assert!(
        python.is_file(),
        "{} is missing: run `PEERS={peer} bench/peers/setup.sh` (scripts/test.sh does) or set {variable}",
        python.display()
    );
    python
}

/// The Python that has `kserve`, `grpcio` and `onnxruntime`.
fn kserve_python() -> PathBuf {
    peer_python("kserve", "SKIFF_KSERVE_PYTHON")
}

#[tokio::test]
async fn kserve_python_clients_get_onnx_runtime_answers_over_grpc_and_binary_rest() {
    let models = repo().join("examples/models");
    let server = Server::start_ready(&["--model-dir", &models.display().to_string()]).await;
    let address = server.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(kserve_python())
            .arg(repo().join("tests/conformance/kserve_clients.py"))
            .args(["--rest", &format!("http://{address}"), "--grpc", &address])
            .arg("--models")
            .arg(&models)
            .output()
            .expect("run the conformance script")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the KServe clients' checks failed (see above)");
    assert!(stdout.contains("ok   gRPC ModelInfer iris (raw contents): label matches ONNX Runtime"));
    assert!(stdout.contains("ok   REST adder (binary_data=True): answered in binary"));
    assert!(stdout.ends_with("all checks passed\n"));
}

/// Every fixture model with expected outputs, and `lookup` (an index past its table fails inside
/// ONNX Runtime), in one folder the server serves.
fn triton_models() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for model in [
        "examples/models/iris",
        "examples/models/mlp",
        "examples/models/adder",
        "tests/fixtures/models/dtypes",
        "tests/fixtures/models/lookup",
    ] {
        let source = repo().join(model);
        std::os::unix::fs::symlink(&source, dir.path().join(source.file_name().unwrap())).unwrap();
    }
    dir
}

#[tokio::test]
async fn triton_clients_pass_over_http_grpc_asyncio_and_streams_with_onnx_runtime_answers() {
    let python = peer_python("triton", "SKIFF_TRITON_PYTHON");
    let models = triton_models();
    let server = Server::start_ready(&["--model-dir", &models.path().display().to_string()]).await;
    let address = server.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(repo().join("tests/conformance/triton_clients.py"))
            .args(["--http", &address, "--grpc", &address])
            .output()
            .expect("run the Triton conformance script")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the Triton clients' checks failed (see above)");
    let passed = stdout.lines().find_map(|l| l.strip_suffix(" calls passed")).expect("a count of the calls passed");
    assert!(passed.parse::<u32>().unwrap() > 0, "{passed}");
    for line in [
        "ok   HTTP model config iris follows the graph",
        "ok   gRPC model ready: unknown model is false",
        "ok   gRPC stream: unknown model answered in band",
        "ok   gRPC aio stream adder/two-rows in order: matches ONNX Runtime",
        "ok   HTTP infer dtypes/all-types (JSON): matches ONNX Runtime",
        "ok   HTTP aio infer dtypes/all-types: matches ONNX Runtime",
    ] {
        assert!(stdout.contains(line), "no line {line:?}");
    }
    assert!(!stdout.lines().any(|l| l.starts_with("FAIL ")), "a call failed");
}
