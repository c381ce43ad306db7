//! KServe's own Python clients (`kserve` from PyPI: `InferenceGRPCClient`, typed and raw contents,
//! all six methods; `InferenceRESTClient` with `binary_data=True`) against the real server, every
//! output compared with ONNX Runtime's in Python (`tests/conformance/kserve_clients.py`). The
//! clients live in the venv `bench/peers/setup.sh` makes (`scripts/test.sh` runs it), or the
//! Python named by `SKIFF_KSERVE_PYTHON`.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

/// The Python that has `kserve`, `grpcio` and `onnxruntime`.
fn kserve_python() -> PathBuf {
    let python = std::env::var_os("SKIFF_KSERVE_PYTHON")
        .map_or_else(|| repo().join(".bench/kserve-venv/bin/python"), PathBuf::from);
    assert!(
        python.is_file(),
        "{} is missing: run `PEERS=kserve bench/peers/setup.sh` (scripts/test.sh does) or set SKIFF_KSERVE_PYTHON",
        python.display()
    );
    python
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
