//! The fetcher and the cache against a real HTTP server on 127.0.0.1: parallel ranges, archives,
//! cut connections, missing files, and the cache's single flight, versions and eviction.

mod common;

use std::sync::atomic::Ordering;

use common::FileServer;
use skiff_fetch::env::StoreEnv;
use skiff_fetch::{Cache, Error, Fetcher};

fn fetcher() -> Fetcher {
    let mut fetcher = Fetcher::new(StoreEnv::from_lookup(|_| None).unwrap());
    fetcher.plan.chunk = 256 << 10;
    fetcher.plan.parallel = 4;
    fetcher
}

/// Bytes that differ at every offset a range could start at.
fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) as u8
        })
        .collect()
}

async fn server_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, FileServer) {
    let root = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        let path = root.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let server = FileServer::start(root.path().to_owned()).await;
    (root, server)
}

#[tokio::test]
async fn a_large_file_arrives_whole_in_parallel_ranges() {
    let model = content(5 << 20, 1);
    let (_root, server) = server_with(&[("model.onnx", &model)]).await;
    let out = tempfile::tempdir().unwrap();
    let report = fetcher().fetch(&server.url("model.onnx"), out.path()).await.unwrap();
    assert_eq!(std::fs::read(out.path().join("model.onnx")).unwrap(), model);
    assert_eq!((report.objects, report.bytes, report.downloaded), (1, 5 << 20, 5 << 20));
    assert_eq!(server.gets_of("model.onnx"), 20, "5 MiB in 256 KiB ranges");
}

#[tokio::test]
async fn a_tar_gz_is_unpacked_as_kserve_does() {
    let mut tar = tar::Builder::new(Vec::new());
    let weights = content(300 << 10, 2);
    let mut header = tar::Header::new_gnu();
    header.set_size(weights.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, "iris/model.onnx", weights.as_slice()).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar.into_inner().unwrap()).unwrap();
    let (_root, server) = server_with(&[("models/iris.tar.gz", &gz.finish().unwrap())]).await;
    let out = tempfile::tempdir().unwrap();
    fetcher().fetch(&server.url("models/iris.tar.gz"), out.path()).await.unwrap();
    assert_eq!(std::fs::read(out.path().join("iris/model.onnx")).unwrap(), weights);
    assert!(!out.path().join("iris.tar.gz").exists(), "the archive is removed");
}

#[tokio::test]
async fn a_connection_cut_once_is_retried_and_loses_nothing() {
    let model = content(1 << 20, 3);
    let (_root, server) = server_with(&[("model.onnx", &model)]).await;
    server.faults.cut_after.store(10_000, Ordering::SeqCst);
    server.faults.cuts.store(2, Ordering::SeqCst);
    let out = tempfile::tempdir().unwrap();
    fetcher().fetch(&server.url("model.onnx"), out.path()).await.unwrap();
    assert_eq!(std::fs::read(out.path().join("model.onnx")).unwrap(), model);
}

#[tokio::test]
async fn a_connection_cut_every_time_fails_naming_the_uri_and_leaves_no_entry() {
    let model = content(1 << 20, 4);
    let (_root, server) = server_with(&[("model.onnx", &model)]).await;
    server.faults.cut_after.store(10_000, Ordering::SeqCst);
    server.faults.cuts.store(usize::MAX, Ordering::SeqCst);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), 1 << 30).unwrap();
    let error = cache.get(&fetcher(), &server.url("model.onnx")).await.unwrap_err();
    assert!(matches!(error, Error::Transfer { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.starts_with(&server.url("model.onnx")), "{message}");
    assert!(cache.entries().unwrap().is_empty());
    assert_eq!(std::fs::read_dir(cache_dir.path().join("tmp")).unwrap().count(), 0, "the partial download is gone");
}

#[tokio::test]
async fn a_missing_file_and_a_refused_token_say_which() {
    let (_root, server) = server_with(&[("model.onnx", b"x")]).await;
    let missing = fetcher().fetch(&server.url("nothing.onnx"), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(missing, Error::NotFound { .. }), "{missing:?}");
    assert!(missing.to_string().contains("404"), "{missing}");
    *server.faults.token.lock().unwrap() = Some("t".into());
    let denied = fetcher().fetch(&server.url("model.onnx"), tempfile::tempdir().unwrap().path()).await.unwrap_err();
    assert!(matches!(denied, Error::Denied { .. }), "{denied:?}");
}

#[tokio::test]
async fn five_replicas_starting_at_once_download_the_model_once() {
    let model = content(2 << 20, 5);
    let (_root, server) = server_with(&[("model.onnx", &model)]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let uri = server.url("model.onnx");
    let starts = (0..5).map(|_| {
        let (cache, uri) = (Cache::open(cache_dir.path(), 1 << 30).unwrap(), uri.clone());
        tokio::spawn(async move { cache.get(&fetcher(), &uri).await.unwrap() })
    });
    let leases: Vec<_> = futures::future::join_all(starts).await.into_iter().map(Result::unwrap).collect();
    assert_eq!(server.sent.load(Ordering::SeqCst), 2 << 20, "the bytes of one download");
    assert_eq!(leases.iter().filter(|l| !l.report.cached).count(), 1);
    for lease in &leases {
        assert_eq!(lease.dir, leases[0].dir);
        assert_eq!(std::fs::read(lease.dir.join("model.onnx")).unwrap(), model);
    }
    let again = Cache::open(cache_dir.path(), 1 << 30).unwrap().get(&fetcher(), &uri).await.unwrap();
    assert!(again.report.cached && again.report.downloaded == 0);
    assert_eq!(server.sent.load(Ordering::SeqCst), 2 << 20, "a later cold start downloads nothing");
}

#[tokio::test]
async fn a_changed_model_is_fetched_again() {
    let (root, server) = server_with(&[("model.onnx", b"version one")]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), 1 << 30).unwrap();
    let uri = server.url("model.onnx");
    let first = cache.get(&fetcher(), &uri).await.unwrap();
    std::fs::write(root.path().join("model.onnx"), b"version two").unwrap();
    let second = cache.get(&fetcher(), &uri).await.unwrap();
    assert_ne!(first.dir, second.dir);
    assert_eq!(std::fs::read(second.dir.join("model.onnx")).unwrap(), b"version two");
    assert_eq!(std::fs::read(first.dir.join("model.onnx")).unwrap(), b"version one", "the first is still whole");
}

#[tokio::test]
async fn the_least_recently_used_model_not_in_use_is_evicted() {
    let size = 100 << 10;
    let files: Vec<(String, Vec<u8>)> = (0..3).map(|i| (format!("m{i}.onnx"), content(size, 10 + i))).collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    let (_root, server) = server_with(&refs).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), (size as u64) * 5 / 2).unwrap();
    let held = cache.get(&fetcher(), &server.url("m0.onnx")).await.unwrap();
    drop(cache.get(&fetcher(), &server.url("m1.onnx")).await.unwrap());
    let newest = cache.get(&fetcher(), &server.url("m2.onnx")).await.unwrap();
    let kept: Vec<String> = cache.entries().unwrap().into_iter().map(|e| e.meta.uri).collect();
    assert_eq!(kept, [server.url("m0.onnx"), server.url("m2.onnx")], "m0 is older but in use; m1 goes");
    assert!(held.dir.join("m0.onnx").is_file() && newest.dir.join("m2.onnx").is_file());
    drop((held, newest));
    let evicted = cache.prune(0).unwrap();
    assert_eq!(evicted.len(), 2);
    assert!(cache.entries().unwrap().is_empty());
}

#[tokio::test]
async fn a_model_larger_than_the_cache_is_refused_before_downloading() {
    let (_root, server) = server_with(&[("model.onnx", &content(64 << 10, 7))]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), 1 << 10).unwrap();
    let error = cache.get(&fetcher(), &server.url("model.onnx")).await.unwrap_err();
    assert!(error.to_string().contains("the model is 65536 bytes, over the limit of 1024 bytes"), "{error}");
    assert_eq!(server.sent.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_entry_is_flushed_and_one_of_an_earlier_boot_never_flushed_is_fetched_again() {
    let model = content(300 << 10, 8);
    let (_root, server) = server_with(&[("model.onnx", &model)]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), 1 << 30).unwrap();
    let uri = server.url("model.onnx");
    drop(cache.get(&fetcher(), &uri).await.unwrap());
    let meta_path = || {
        std::fs::read_dir(cache_dir.path().join("models"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .unwrap()
    };
    let meta = || serde_json::from_slice::<serde_json::Value>(&std::fs::read(meta_path()).unwrap()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while meta()["durable"] != true {
        assert!(std::time::Instant::now() < deadline, "the entry was never recorded flushed: {}", meta());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(cache.get(&fetcher(), &uri).await.unwrap().report.downloaded, 0, "a flushed entry is trusted");

    let mut torn = meta();
    torn["durable"] = false.into();
    torn["boot"] = "an-earlier-boot".into();
    std::fs::write(meta_path(), serde_json::to_vec(&torn).unwrap()).unwrap();
    let again = cache.get(&fetcher(), &uri).await.unwrap();
    assert_eq!(again.report.downloaded, model.len() as u64, "an unflushed entry of another boot is fetched again");
    assert_eq!(std::fs::read(again.dir.join("model.onnx")).unwrap(), model);
    assert_eq!(cache.entries().unwrap().len(), 1);
}

#[tokio::test]
async fn a_cached_file_changed_on_disk_is_never_served() {
    let model = content(200 << 10, 9);
    let (_root, server) = server_with(&[("model.onnx", &model)]).await;
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), 1 << 30).unwrap();
    let uri = server.url("model.onnx");
    let first = cache.get(&fetcher(), &uri).await.unwrap();
    let cached = first.dir.join("model.onnx");
    // The same size, other bytes: what a stray write or a bad disk leaves.
    std::fs::write(&cached, content(200 << 10, 10)).unwrap();
    let refused = cache.get(&fetcher(), &uri).await.unwrap_err().to_string();
    assert!(refused.contains("changed on disk") && refused.contains("a replica still holds it"), "{refused}");
    drop(first);

    let again = cache.get(&fetcher(), &uri).await.unwrap();
    assert_eq!(again.report.downloaded, model.len() as u64, "the changed entry is fetched again");
    assert_eq!(std::fs::read(again.dir.join("model.onnx")).unwrap(), model);
    drop(again);
    assert_eq!(cache.get(&fetcher(), &uri).await.unwrap().report.downloaded, 0, "the new entry is trusted");
    assert_eq!(server.gets_of("model.onnx"), 2);
}

#[tokio::test]
async fn another_query_is_another_model_even_with_the_same_date() {
    let (_root, server) = server_with(&[("model.onnx?v=1", b"version one"), ("model.onnx?v=2", b"version two")]).await;
    server.faults.by_query.store(true, Ordering::SeqCst);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path(), 1 << 30).unwrap();
    let one = cache.get(&fetcher(), &server.url("model.onnx?v=1")).await.unwrap();
    let two = cache.get(&fetcher(), &server.url("model.onnx?v=2")).await.unwrap();
    assert_eq!(std::fs::read(one.dir.join("model.onnx")).unwrap(), b"version one");
    assert_eq!(std::fs::read(two.dir.join("model.onnx")).unwrap(), b"version two");
    assert!(!two.report.cached);
    let again = cache.get(&fetcher(), &server.url("model.onnx?v=2")).await.unwrap();
    assert!(again.report.cached && again.dir == two.dir);
    let meta = std::fs::read_dir(cache_dir.path().join("models")).unwrap().map(|e| e.unwrap().path());
    for json in meta.filter(|p| p.extension().is_some_and(|x| x == "json")) {
        let text = std::fs::read_to_string(json).unwrap();
        assert!(!text.contains("v=1") && !text.contains("v=2"), "a query is kept only as a digest: {text}");
    }
}

#[test]
fn skiff_fetch_never_shows_the_credentials_of_a_uri_that_does_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    for uri in [
        "https://alice:PASSWORD@h.example:99999/m.onnx?X-Amz-Signature=SIGNATURE",
        "https://alice:PASSWORD@[::1/m.onnx?X-Amz-Signature=SIGNATURE",
        "s3://KEY:PASSWORD@models/m.onnx?X-Amz-Signature=SIGNATURE",
    ] {
        let termination = dir.path().join("termination");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_skiff-fetch"))
            .arg(uri)
            .arg(dir.path().join("model"))
            .arg("--termination-message")
            .arg(&termination)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "a bad URI's exit code: {stderr}");
        let message = std::fs::read_to_string(&termination).unwrap_or_default();
        for text in [&*stderr, &message] {
            assert!(text.contains("fetching the model failed"), "{text}");
            for secret in ["PASSWORD", "SIGNATURE", "alice", "KEY"] {
                assert!(!text.contains(secret), "{uri} shows {secret}: {text}");
            }
        }
    }
}
