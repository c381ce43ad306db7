//! The node cache (`skiff-model-cache`) and the init container (`skiff-fetch --node-cache`) as
//! real processes against MinIO: a model downloaded once however many init containers ask
//! (concurrent cold starts included), the caller's credentials checked against the store on
//! every request even for a cached model, files read only with a ticket, endpoints on the node's
//! own addresses refused, and a direct fetch when the node cache is not there. Hostile archives
//! (chains of links, a bomb) write, read and unpack nothing outside their folder or past the
//! cache's limit, whether `skiff-fetch` unpacks them or the node cache does.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use common::archives::{self, RawEntry};
use common::stores::{self, S3_KEY, Store};

/// A running `skiff-model-cache`, killed when dropped.
struct NodeCache {
    child: Child,
    url: String,
    root: tempfile::TempDir,
}

impl Drop for NodeCache {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn node_cache(args: &[&str]) -> NodeCache {
    node_cache_at("127.0.0.1:0", args)
}

/// A `skiff-model-cache` listening on `listen`.
fn node_cache_at(listen: &str, args: &[&str]) -> NodeCache {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_skiff-model-cache"))
        .args(["--listen", listen, "--root"])
        .arg(root.path())
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start skiff-model-cache");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("skiff-model-cache exited").unwrap();
        if let Some(rest) = line.strip_prefix("skiff-model-cache listening on ") {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    NodeCache { child, url: format!("http://{addr}"), root }
}

/// Runs `skiff-fetch URI DIR --node-cache NODE` with `env`; its output.
fn init_container(uri: &str, dir: &Path, node: &str, env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skiff-fetch"))
        .args([uri])
        .arg(dir)
        .args(["--node-cache", node, "--termination-message"])
        .arg(dir.with_extension("termination"))
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .unwrap()
}

/// The JSON line of a successful `skiff-fetch`.
fn report(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "skiff-fetch failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect()
}

fn minio_with(models: &[(&str, &[u8])]) -> Store {
    let minio = stores::minio(&["models"]);
    for (key, content) in models {
        minio.s3_put("models", key, content);
    }
    minio
}

#[test]
fn a_model_is_downloaded_once_per_node_and_only_for_callers_the_store_admits() {
    let weights = bytes(700 << 10, 1);
    let minio = minio_with(&[("iris/model.onnx", &weights), ("iris/meta/labels.txt", b"a\nb\nc\n")]);
    let total = weights.len() as u64 + 6;
    let node = node_cache(&["--allow-loopback"]);
    let env = minio.s3_env(S3_KEY);
    let pods = tempfile::tempdir().unwrap();

    let first = pods.path().join("first");
    let cold = report(&init_container("s3://models/iris", &first, &node.url, &env));
    assert_eq!(
        (cold["via"].as_str(), cold["downloaded"].as_u64(), cold["cached"].as_bool()),
        (Some("node-cache"), Some(total), Some(false))
    );
    assert_eq!(std::fs::read(first.join("model.onnx")).unwrap(), weights);
    assert_eq!(std::fs::read(first.join("meta/labels.txt")).unwrap(), b"a\nb\nc\n");

    let second = pods.path().join("second");
    let warm = report(&init_container("s3://models/iris", &second, &node.url, &env));
    assert_eq!(
        (warm["via"].as_str(), warm["downloaded"].as_u64(), warm["cached"].as_bool()),
        (Some("node-cache"), Some(0), Some(true))
    );
    assert_eq!(warm["bytes"].as_u64(), Some(total));
    assert_eq!(std::fs::read(second.join("model.onnx")).unwrap(), weights);

    // The model is cached, but a caller whose secret the store refuses gets nothing from it.
    let wrong = minio.s3_env((S3_KEY.0, "not-the-secret"));
    let denied_dir = pods.path().join("denied");
    let denied = init_container("s3://models/iris", &denied_dir, &node.url, &wrong);
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert_eq!(denied.status.code(), Some(4), "access denied's exit code: {stderr}");
    assert!(stderr.contains("fetching the model failed: s3://models/iris: access denied"), "{stderr}");
    assert!(!stderr.contains("not-the-secret"), "{stderr}");
    assert!(!stderr.contains("fetching directly"), "a refusal of the store is final: {stderr}");
    assert!(!denied_dir.join("model.onnx").exists());

    // Nor does a caller without credentials (the bucket is private).
    let anonymous: Vec<(String, String)> = env.iter().filter(|(k, _)| !k.starts_with("AWS_")).cloned().collect();
    let anonymous = [anonymous, vec![("AWS_ENDPOINT_URL".to_owned(), minio.url.clone())]].concat();
    let refused = init_container("s3://models/iris", &pods.path().join("anonymous"), &node.url, &anonymous);
    assert_eq!(refused.status.code(), Some(4), "{}", String::from_utf8_lossy(&refused.stderr));

    // A missing model is the store's answer too: exit 3, no direct fetch.
    let missing = init_container("s3://models/nothing", &pods.path().join("missing"), &node.url, &env);
    assert_eq!(missing.status.code(), Some(3), "{}", String::from_utf8_lossy(&missing.stderr));

    let out = Command::new("curl").args(["-fsS", &format!("{}/metrics", node.url)]).output().unwrap();
    let metrics = String::from_utf8(out.stdout).unwrap();
    for line in [
        "skiff_model_cache_requests_total{outcome=\"download\"} 1".to_owned(),
        "skiff_model_cache_requests_total{outcome=\"hit\"} 1".to_owned(),
        "skiff_model_cache_requests_total{outcome=\"denied\"} 2".to_owned(),
        "skiff_model_cache_requests_total{outcome=\"not_found\"} 1".to_owned(),
        format!("skiff_model_cache_downloaded_bytes_total {total}"),
        format!("skiff_model_cache_sent_bytes_total {}", 2 * total),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} not in\n{metrics}");
    }
}

#[test]
fn concurrent_cold_starts_on_a_node_download_the_model_once() {
    let weights = bytes(2 << 20, 2);
    let minio = minio_with(&[("burst/model.onnx", &weights)]);
    let node = node_cache(&["--allow-loopback"]);
    let env = minio.s3_env(S3_KEY);
    let pods = tempfile::tempdir().unwrap();
    let starts: Vec<_> = (0..4)
        .map(|i| {
            let (dir, url, env) = (pods.path().join(format!("pod-{i}")), node.url.clone(), env.clone());
            std::thread::spawn(move || (report(&init_container("s3://models/burst", &dir, &url, &env)), dir))
        })
        .collect();
    let mut downloaded = 0;
    for start in starts {
        let (line, dir) = start.join().unwrap();
        assert_eq!(line["via"], "node-cache");
        downloaded += line["downloaded"].as_u64().unwrap();
        assert_eq!(std::fs::read(dir.join("model.onnx")).unwrap(), weights);
    }
    assert_eq!(downloaded, weights.len() as u64, "four cold starts, one download");
}

#[test]
fn without_a_node_cache_the_init_container_fetches_directly() {
    let weights = bytes(100 << 10, 3);
    let minio = minio_with(&[("iris/model.onnx", &weights)]);
    let env = minio.s3_env(S3_KEY);
    let pods = tempfile::tempdir().unwrap();

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let down = format!("http://{closed}");
    let out = init_container("s3://models/iris", &pods.path().join("down"), &down, &env);
    let line = report(&out);
    assert_eq!((line["via"].as_str(), line["downloaded"].as_u64()), (Some("direct"), Some(weights.len() as u64)));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("the node cache {down} did not give the model")), "{stderr}");
    assert_eq!(std::fs::read(pods.path().join("down/model.onnx")).unwrap(), weights);

    // A node cache that may not reach the node's own addresses refuses this store (127.0.0.1)
    // for the caller, which fetches it from its own network instead.
    let guarded = node_cache(&[]);
    let out = init_container("s3://models/iris", &pods.path().join("guarded"), &guarded.url, &env);
    assert_eq!(report(&out)["via"], "direct");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not reach 127.0.0.1 for a caller"), "{stderr}");
}

#[test]
fn a_node_cache_that_admits_the_pod_a_moment_late_is_still_used() {
    // A NetworkPolicy engine admits a new pod's address a moment after the pod starts: until then
    // the node cache's address refuses the init container, which tries again for a moment.
    let weights = bytes(100 << 10, 4);
    let minio = minio_with(&[("iris/model.onnx", &weights)]);
    let env = minio.s3_env(S3_KEY);
    let pods = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let late = format!("http://127.0.0.1:{port}");
    let dir = pods.path().join("late");
    let fetch = std::thread::spawn({
        let (late, dir, env) = (late.clone(), dir.clone(), env.clone());
        move || init_container("s3://models/iris", &dir, &late, &env)
    });
    std::thread::sleep(std::time::Duration::from_millis(700));
    let _node = node_cache_at(&format!("127.0.0.1:{port}"), &["--allow-loopback"]);
    let out = fetch.join().unwrap();
    assert_eq!(report(&out)["via"], "node-cache", "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(dir.join("model.onnx")).unwrap(), weights);

    // A name that does not resolve is no node cache: it is not asked again, the fetch is direct.
    let nxdomain = "http://skiff-model-cache.invalid:8095";
    let out = init_container("s3://models/iris", &pods.path().join("nxdomain"), nxdomain, &env);
    assert_eq!(report(&out)["via"], "direct");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("(resolving skiff-model-cache.invalid: "), "{stderr}");
}

#[test]
fn files_are_read_only_with_the_ticket_of_a_request_the_store_admitted() {
    let minio = minio_with(&[("iris/model.onnx", b"weights")]);
    let node = node_cache(&["--allow-loopback"]);
    let curl = |args: &[&str]| {
        let out = Command::new("curl").args(["-sS", "-w", "\n%{http_code}"]).args(args).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.to_owned(), body.to_owned())
    };
    let env: serde_json::Map<String, serde_json::Value> =
        minio.s3_env(S3_KEY).into_iter().map(|(k, v)| (k, v.into())).collect();
    let request = serde_json::json!({"uri": "s3://models/iris", "env": env}).to_string();
    let (code, body) = curl(&[
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
        "-d",
        &request,
        &format!("{}/v1/models", node.url),
    ]);
    assert_eq!(code, "200", "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["files"], serde_json::json!([{"path": "model.onnx", "size": 7}]));
    let file = format!("{}/v1/models/{}/model.onnx", node.url, answer["key"].as_str().unwrap());
    let (code, body) = curl(&[&file]);
    assert_eq!(code, "401", "{body}");
    assert!(body.contains("no ticket for model"), "{body}");
    let (code, _) = curl(&["-H", "authorization: Bearer not-a-ticket", &file]);
    assert_eq!(code, "401");
    let ticket = format!("authorization: Bearer {}", answer["ticket"].as_str().unwrap());
    assert_eq!(curl(&["-H", &ticket, &file]), ("200".to_owned(), "weights".to_owned()));
    let escape = format!("{}/v1/models/{}/..%2F..%2Fmodels", node.url, answer["key"].as_str().unwrap());
    assert_eq!(curl(&["-H", &ticket, &escape]).0, "404");
    let (code, body) =
        curl(&["-H", &ticket, &format!("{}/v1/models/{}/nothing.onnx", node.url, answer["key"].as_str().unwrap())]);
    assert_eq!(code, "404", "{body}");
    assert!(body.contains("has no file") && body.contains("nothing.onnx"), "{body}");
    let (code, body) = curl(&["-X", "POST", "-d", "{not json", &format!("{}/v1/models", node.url)]);
    assert_eq!(code, "400", "{body}");
    assert!(body.contains("the request is not a model request"), "{body}");
    let big = "x".repeat(100 << 10);
    assert_eq!(curl(&["-X", "POST", "-d", &big, &format!("{}/v1/models", node.url)]).0, "413");
}

/// A tiny HTTP server on `ip` answering every request with `answer(port of the request's path)`;
/// the requests it got are counted.
struct Canned {
    addr: std::net::SocketAddr,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn canned(ip: std::net::IpAddr, answer: impl Fn(&str) -> String + Send + 'static) -> Canned {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let line = String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let _ = stream.write_all(answer(&path).as_bytes());
        }
    });
    Canned { addr, hits }
}

/// This machine's address on its network (not loopback): the source of a route outward.
fn outward_ip() -> std::net::IpAddr {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    probe.connect("203.0.113.1:9").expect("this test needs a route off the machine (any non-loopback address)");
    let ip = probe.local_addr().unwrap().ip();
    assert!(!ip.is_loopback(), "this test needs an address other than loopback, found {ip}");
    ip
}

#[test]
fn a_redirect_to_the_nodes_own_services_is_refused_at_every_hop() {
    const CREDENTIAL: &str = "NODE-CREDENTIAL-aws-secret";
    let credentials = canned("127.0.0.1".parse().unwrap(), |_| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\netag: \"c\"\r\nconnection: close\r\n\r\n{CREDENTIAL}",
            CREDENTIAL.len()
        )
    });
    let port = credentials.addr.port();
    let store = canned(outward_ip(), move |path| {
        let target = if path.contains("by-name") { "localhost" } else { "127.0.0.1" };
        format!(
            "HTTP/1.1 302 Found\r\nlocation: http://{target}:{port}/latest/meta-data/iam\r\ncontent-length: 0\r\n\
             connection: close\r\n\r\n"
        )
    });
    let node = node_cache(&[]);
    let ask = |uri: &str, env: serde_json::Value| {
        let request = serde_json::json!({"uri": uri, "env": env}).to_string();
        let out = Command::new("curl")
            .args(["-sS", "-w", "\n%{http_code}", "-H", "content-type: application/json", "-d", &request])
            .arg(format!("{}/v1/models", node.url))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.to_owned(), body.to_owned())
    };
    let cases = [
        (format!("http://{}/model.onnx", store.addr), serde_json::json!({}), format!("127.0.0.1:{port}")),
        (format!("http://{}/by-name/model.onnx", store.addr), serde_json::json!({}), format!("localhost:{port}")),
        (
            "s3://models/model.onnx".to_owned(),
            serde_json::json!({"AWS_ENDPOINT_URL": format!("http://{}", store.addr)}),
            format!("127.0.0.1:{port}"),
        ),
    ];
    for (uri, env, host) in cases {
        let (code, body) = ask(&uri, env);
        assert_eq!(code, "403", "{uri}: {body}");
        assert!(body.contains(&format!("the node cache does not reach {host}")), "{uri}: {body}");
        assert!(!body.contains(CREDENTIAL), "{uri}: {body}");
    }
    assert!(store.hits.load(std::sync::atomic::Ordering::SeqCst) >= 3, "the store was asked");
    assert_eq!(
        credentials.hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the node's own service was never reached"
    );
}

#[test]
fn the_init_step_gives_the_cache_to_its_user_and_never_follows_a_link() {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    assert_eq!(uid, 0, "changing owners needs root, as the DaemonSet's init step has");
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("model-cache");
    std::fs::create_dir_all(cache.join("models/abc/sub")).unwrap();
    std::fs::write(cache.join("models/abc/sub/model.onnx"), b"weights").unwrap();
    let outside = root.path().join("node-file");
    std::fs::write(&outside, b"the node's").unwrap();
    std::os::unix::fs::symlink(&outside, cache.join("models/abc/link")).unwrap();
    let own = |owner: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_skiff-model-cache"))
            .args(["--own-root", owner, "--root"])
            .arg(&cache)
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, stderr) = own("65532:65533");
    assert!(ok && stderr.contains("belongs to 65532:65533 (6 entries changed)"), "{stderr}");
    for path in ["", "models", "models/abc", "models/abc/sub", "models/abc/sub/model.onnx", "models/abc/link"] {
        let meta = std::fs::symlink_metadata(cache.join(path)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65532, 65533), "{path}");
    }
    assert_eq!(std::fs::metadata(&outside).unwrap().uid(), 0, "a link's target keeps its owner");
    assert!(own("65532:65533").1.contains("(0 entries changed)"), "a second start changes nothing");
    let (ok, stderr) = own("nobody");
    assert!(!ok && stderr.contains("UID:GID"), "{stderr}");
}

/// Runs `skiff-fetch URI DIR` (no node cache) with `env`; its output.
fn direct(uri: &str, dir: &Path, env: &[(String, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_skiff-fetch"))
        .args([uri])
        .arg(dir)
        .arg("--termination-message")
        .arg(dir.with_extension("termination"))
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .unwrap()
}

/// `curl -sS ARGS`: the status code and the body.
fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("curl").args(["-sS", "-w", "\n%{http_code}"]).args(args).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.to_owned(), body.to_owned())
}

/// `POST /v1/models` for `uri` with MinIO's credentials: the status code and the answer.
fn ask(node: &NodeCache, minio: &Store, uri: &str) -> (String, serde_json::Value) {
    let env: serde_json::Map<String, serde_json::Value> =
        minio.s3_env(S3_KEY).into_iter().map(|(k, v)| (k, v.into())).collect();
    let request = serde_json::json!({"uri": uri, "env": env}).to_string();
    let url = format!("{}/v1/models", node.url);
    let (code, body) = curl(&["-X", "POST", "-H", "content-type: application/json", "-d", &request, &url]);
    (code, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
}

/// Through links that each stay inside the folder, an archive made `skiff-fetch` create a file
/// beside it and overwrite one through a hard link (issue 33, finding 1): both are refused,
/// exit 7, and leave nothing outside, nor anything unpacked inside.
#[test]
fn a_chain_of_links_in_an_archive_writes_nothing_outside_the_folder() {
    let pods = tempfile::tempdir().unwrap();
    let sentinel = pods.path().join("sentinel");
    std::fs::write(&sentinel, "SENTINEL").unwrap();
    let (link, hard, file) = (tar::EntryType::Symlink, tar::EntryType::Link, tar::EntryType::Regular);
    // `a/l1` is the folder holding the pod's: `pods`.
    let through_link: [RawEntry<'_>; 2] = [("f", link, b"", "a/l1/created"), ("f", file, b"pwned", "")];
    let through_hard_link: [RawEntry<'_>; 2] = [("h", hard, b"", "a/l1/sentinel"), ("h", file, b"pwned", "")];
    let minio = minio_with(&[
        ("create/model.tar", &archives::ladder_tar(1, &through_link)),
        ("overwrite/model.tar", &archives::ladder_tar(1, &through_hard_link)),
    ]);
    let env = minio.s3_env(S3_KEY);
    for model in ["create", "overwrite"] {
        let pod = pods.path().join(model);
        let out = direct(&format!("s3://models/{model}"), &pod, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "{model}: an archive's exit code: {stderr}");
        assert!(stderr.contains(&format!("s3://models/{model}: archive model.tar: ")), "{stderr}");
        let left: Vec<_> = std::fs::read_dir(&pod).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["model.tar"], "{model}: nothing unpacked is left");
    }
    assert!(!pods.path().join("created").exists(), "no file is created outside the folder");
    assert_eq!(std::fs::read_to_string(&sentinel).unwrap(), "SENTINEL", "no file outside is overwritten");
}

/// With the ticket of its own crafted archive, a caller read a file of the node and another
/// tenant's cached model through links (issue 33, finding 2). The archive is refused; and an
/// entry that holds links (unpacked by an earlier version, or changed on the disk) serves only
/// its regular files, never what a link points to.
#[test]
fn a_caller_reads_nothing_outside_its_entry_of_the_node_cache() {
    let node_files = tempfile::tempdir().unwrap();
    let secret = node_files.path().join("credentials");
    std::fs::write(&secret, "NODE SECRET").unwrap();
    // `a/l40` is the root of the file system, wherever the entry lies.
    let peek = format!("a/l40{}", secret.display());
    let crafted = archives::ladder_tar(40, &[("peek", tar::EntryType::Symlink, b"", &peek)]);
    let minio = minio_with(&[
        ("crafted/model.tar", &crafted),
        ("mine/model.onnx", b"my weights"),
        ("tenant/model.onnx", b"the other tenant's weights"),
    ]);
    let node = node_cache(&["--allow-loopback"]);

    let (code, refused) = ask(&node, &minio, "s3://models/crafted");
    assert_eq!(code, "422", "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(message.starts_with("s3://models/crafted: archive model.tar: link "), "{message}");
    assert!(message.contains("leads outside the folder"), "{message}");

    let (code, tenant) = ask(&node, &minio, "s3://models/tenant");
    assert_eq!(code, "200", "{tenant}");
    let (code, mine) = ask(&node, &minio, "s3://models/mine");
    assert_eq!(code, "200", "{mine}");
    let key = mine["key"].as_str().unwrap();
    let entry = node.root.path().join("models").join(key);
    let tenant_entry = node.root.path().join("models").join(tenant["key"].as_str().unwrap());
    std::os::unix::fs::symlink(&secret, entry.join("peek")).unwrap();
    std::os::unix::fs::symlink(tenant_entry.join("model.onnx"), entry.join("theirs.onnx")).unwrap();
    std::os::unix::fs::symlink(&tenant_entry, entry.join("via")).unwrap();
    let ticket = format!("authorization: Bearer {}", mine["ticket"].as_str().unwrap());
    let get = |path: &str| curl(&["-H", &ticket, &format!("{}/v1/models/{key}/{path}", node.url)]);
    assert_eq!(get("model.onnx"), ("200".to_owned(), "my weights".to_owned()));
    for path in ["peek", "theirs.onnx", "via/model.onnx"] {
        let (code, body) = get(path);
        assert_eq!(code, "404", "{path}: {body}");
        assert!(body.contains(&format!("model {key} has no file")), "{path}: {body}");
    }
}

/// A 64 MiB archive bomb of a few KiB, in a node cache bounded at 4 MiB (issue 33, finding 5):
/// refused once its unpacked content passes the limit, naming the model and the limit, with
/// nothing left in the cache.
#[test]
fn an_archive_bomb_is_held_to_the_node_caches_limit() {
    let bomb = archives::bomb("model.onnx", 64 << 20);
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let minio = minio_with(&[("bomb/model.tar.gz", &bomb)]);
    let node = node_cache(&["--allow-loopback", "--limit-bytes", &(4u64 << 20).to_string()]);
    let (code, refused) = ask(&node, &minio, "s3://models/bomb");
    assert_eq!(code, "413", "{refused}");
    let message = refused["error"].as_str().unwrap();
    assert!(message.starts_with("s3://models/bomb: the content of model.tar.gz once unpacked is "), "{message}");
    assert!(message.ends_with("over the limit of 4194304 bytes"), "{message}");
    assert!(std::fs::read_dir(node.root.path().join("tmp")).unwrap().next().is_none(), "nothing half-unpacked");
    let models = std::fs::read_dir(node.root.path().join("models")).unwrap();
    assert!(models.map(|e| e.unwrap().path()).all(|p| !p.is_dir()), "no entry");
}
