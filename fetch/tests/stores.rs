//! The fetcher against real stores started by the test (`common::stores`): MinIO for S3,
//! fake-gcs-server for GCS, `hf_hub.py` for the Hugging Face Hub. Every store's prefixes,
//! single objects and refusals (missing, wrong credentials, a connection cut halfway), and a full
//! disk under `skiff-fetch` (a 1 MiB tmpfs in a mount namespace of its own).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::stores::{self, S3_KEY};
use skiff_fetch::env::StoreEnv;
use skiff_fetch::{Error, Fetcher};

fn fetcher(env: &[(String, String)]) -> Fetcher {
    let map: HashMap<String, String> = env.iter().cloned().collect();
    let mut fetcher = Fetcher::new(StoreEnv::from_lookup(|name| map.get(name).cloned()).unwrap());
    fetcher.plan.chunk = 64 << 10;
    fetcher
}

fn read(dir: &Path, path: &str) -> Vec<u8> {
    std::fs::read(dir.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[tokio::test]
async fn s3_prefixes_objects_and_refusals() {
    let minio = stores::minio(&["models", "private"]);
    let weights = bytes(300 << 10, 1);
    minio.s3_put("models", "iris/model.onnx", &weights);
    minio.s3_put("models", "iris/extra/config.json", b"{}");
    minio.s3_put("models", "iris-v2/model.onnx", b"another model");
    let signed = fetcher(&minio.s3_env(S3_KEY));

    let out = tempfile::tempdir().unwrap();
    let report = signed.fetch("s3://models/iris", out.path()).await.unwrap();
    assert_eq!(read(out.path(), "model.onnx"), weights);
    assert_eq!(read(out.path(), "extra/config.json"), b"{}");
    assert_eq!(report.objects, 2, "iris-v2 is another folder");

    let one = tempfile::tempdir().unwrap();
    signed.fetch("s3://models/iris/model.onnx", one.path()).await.unwrap();
    assert_eq!(read(one.path(), "model.onnx"), weights);

    let missing = signed.fetch("s3://models/nothing", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { .. }), "{missing:?}");
    let no_bucket = signed.fetch("s3://no-such-bucket/iris", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(no_bucket, Error::NotFound { .. }), "{no_bucket:?}");
    assert!(no_bucket.to_string().starts_with("s3://no-such-bucket/iris: not found: "), "{no_bucket}");

    let wrong = fetcher(&minio.s3_env((S3_KEY.0, "not-the-secret")));
    let denied = wrong.fetch("s3://models/iris", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(denied, Error::Denied { .. }), "{denied:?}");
    assert!(!denied.to_string().contains("not-the-secret"), "{denied}");

    let anonymous: Vec<(String, String)> = minio
        .s3_env(S3_KEY)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("AWS_"))
        .chain([("AWS_ENDPOINT_URL".to_owned(), minio.url.clone())])
        .collect();
    let refused = fetcher(&anonymous).fetch("s3://models/iris", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(refused, Error::Denied { .. }), "a private bucket refuses anonymous reads: {refused:?}");
    minio.s3_public("models");
    let public = tempfile::tempdir().unwrap();
    fetcher(&anonymous).fetch("s3://models/iris", public.path()).await.unwrap();
    assert_eq!(read(public.path(), "model.onnx"), weights);
}

#[tokio::test]
async fn gcs_prefixes_and_a_missing_object() {
    let weights = bytes(200 << 10, 2);
    let gcs =
        stores::fake_gcs(&[("models", "iris/model.onnx", &weights), ("models", "iris/sub/labels.txt", b"a\nb\n")]);
    let env = [("STORAGE_EMULATOR_HOST".to_owned(), gcs.url.clone())];
    let out = tempfile::tempdir().unwrap();
    let report = fetcher(&env).fetch("gs://models/iris", out.path()).await.unwrap();
    assert_eq!(read(out.path(), "model.onnx"), weights);
    assert_eq!(read(out.path(), "sub/labels.txt"), b"a\nb\n");
    assert_eq!(report.bytes, weights.len() as u64 + 4);
    let missing = fetcher(&env).fetch("gs://models/nothing", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { .. }), "{missing:?}");
}

#[tokio::test]
async fn hugging_face_repositories_tokens_and_cut_connections() {
    let weights = bytes(500 << 10, 3);
    let files: [(&str, &[u8]); 2] = [("org/iris/model.onnx", &weights), ("org/iris/config.json", b"{}")];
    let hub = stores::hf_hub(&files, &["--token", "hf_right"]);
    let env = |token: &str| [("HF_ENDPOINT".to_owned(), hub.url.clone()), ("HF_TOKEN".to_owned(), token.to_owned())];
    let out = tempfile::tempdir().unwrap();
    let report = fetcher(&env("hf_right")).fetch("hf://org/iris", out.path()).await.unwrap();
    assert_eq!(read(out.path(), "model.onnx"), weights);
    assert_eq!(report.objects, 2);

    let denied =
        fetcher(&env("hf_wrong")).fetch("hf://org/iris", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(denied, Error::Denied { .. }), "{denied:?}");
    assert!(!denied.to_string().contains("hf_wrong"), "{denied}");
    let missing =
        fetcher(&env("hf_right")).fetch("hf://org/nothing", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { .. }), "{missing:?}");

    let cutting = stores::hf_hub(&files, &["--cut-after", "20000"]);
    let env = [("HF_ENDPOINT".to_owned(), cutting.url.clone())];
    let cut = fetcher(&env).fetch("hf://org/iris", tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(cut, Error::Transfer { .. }), "{cut:?}");
    assert!(cut.to_string().starts_with("hf://org/iris: "), "{cut}");
}

/// Whether this process may make mount namespaces (root, as the tests run here and in CI).
fn root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

#[tokio::test]
async fn a_full_disk_fails_with_its_cause_and_exit_code() {
    assert!(root(), "the disk-full test mounts a tmpfs: run the tests as root, as CI does");
    let hub = stores::hf_hub(&[("org/big/model.onnx", &bytes(3 << 20, 4))], &[]);
    let target = tempfile::tempdir().unwrap();
    let script = format!(
        "mount -t tmpfs -o size=1m tmpfs {dir} && exec {fetch} hf://org/big {dir}/model --termination-message {dir}/none",
        dir = target.path().display(),
        fetch = env!("CARGO_BIN_EXE_skiff-fetch"),
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("HF_ENDPOINT", &hub.url)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains("fetching the model failed: ") && stderr.contains("No space left on device"), "{stderr}");
}
