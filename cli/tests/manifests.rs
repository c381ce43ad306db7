//! The manifest folder of a real `skiff up`, as a careless user and a hostile file leave it: a file
//! that is not UTF-8, a symbolic link to a secret outside the folder and a 100 MB file beside a good
//! manifest. Each bad file is refused on its own, with its line and column or the bound it broke;
//! the good one is served; the secret shows nowhere (`skiff get`, `-o json`, the web index); each
//! refusal is logged once. And the web app names the files it writes so that two namespaces never
//! share one. A misspelt field is a warning (log, `skiff get`, the status document), and with
//! `--strict` a refusal; a second file that defines a served name is refused, the first keeps it.

mod common;

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use common::browser::Browser;
use common::*;
use http::StatusCode;
use serde_json::json;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";
const SECRET: &str = "TOPSECRET";

fn names(status: &serde_json::Value) -> Vec<String> {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    services.iter().map(|s| format!("{}/{}", s["namespace"].as_str().unwrap(), s["name"].as_str().unwrap())).collect()
}

fn ready(status: &serde_json::Value, name: &str) -> bool {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    services.iter().any(|s| s["name"] == name && s["ready"] == true)
}

/// `skiff get` against `up`, with `args`; its stdout.
fn skiff_get(up: &Up, args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_skiff"))
        .args(["get", "--admin-port", &up.admin.port().to_string()])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "skiff get: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_files_are_refused_one_by_one_and_show_nothing_of_themselves() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    std::fs::write(path.join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    // Not UTF-8: a Latin-1 'é' on line 2, after "ki".
    let mut latin1 = manifest("other", "iris", "minReplicas: 1").into_bytes();
    let at = latin1.iter().position(|b| *b == b'\n').unwrap() + 3;
    latin1.insert(at, 0xE9);
    std::fs::write(path.join("latin1.yaml"), latin1).unwrap();
    // A link to a secret outside the folder.
    let mut secret = tempfile::NamedTempFile::new().unwrap();
    writeln!(secret, "root:$6${SECRET}$hash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::").unwrap();
    std::os::unix::fs::symlink(secret.path(), path.join("shadow.yaml")).unwrap();
    // 100 MB of YAML.
    let mut huge = std::io::BufWriter::new(std::fs::File::create(path.join("huge.yaml")).unwrap());
    for i in 0..(100_000_000 / 20) {
        writeln!(huge, "key{i:012}: value").unwrap();
    }
    huge.into_inner().unwrap().sync_all().unwrap();
    let huge_size = std::fs::metadata(path.join("huge.yaml")).unwrap().len();

    let up = Up::start(path, CONFIG);
    let status = up
        .wait_for("iris ready and three refusals", Duration::from_secs(60), |s| {
            ready(s, "iris") && s["errors"].as_array().is_some_and(|e| e.len() == 3)
        })
        .await;
    assert_eq!(names(&status), ["default/iris"]);
    let dir = path.display();
    let errors: Vec<&str> = status["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(
        errors,
        [
            format!(
                "{dir}/huge.yaml: {huge_size} bytes is more than a manifest may hold (1572864 bytes, etcd's limit \
                 on one request: the Kubernetes API server could not store it either)"
            ),
            format!("{dir}/latin1.yaml: line 2, column 3: not UTF-8 text"),
            format!("{dir}/shadow.yaml: a symbolic link that leads out of the folder; refused"),
        ]
    );
    assert_eq!(up.infer("iris").await.unwrap().status, StatusCode::OK, "the good manifest is served");

    // Nothing of the secret in `skiff get`, `skiff get -o json`, or the web index.
    let table = skiff_get(&up, &[]);
    assert!(table.contains(&format!("refused: {dir}/shadow.yaml: a symbolic link that leads out")), "{table}");
    assert!(table.contains(&format!("refused: {dir}/latin1.yaml: line 2, column 3")), "{table}");
    let json = skiff_get(&up, &["-o", "json"]);
    assert!(json.contains("shadow.yaml") && json.contains("iris-predictor-00001"), "{json}");
    let index =
        send(http::Method::GET, &format!("http://{}/models/?ns=default", up.admin), Bytes::new(), &[]).await.unwrap();
    let index = String::from_utf8_lossy(&index.body).into_owned();
    assert!(index.contains("shadow.yaml") && index.contains("latin1.yaml"), "{index}");
    for (what, text) in [("skiff get", &table), ("skiff get -o json", &json), ("the web index", &index)] {
        assert!(!text.contains(SECRET) && !text.contains("daemon"), "{what} shows the secret: {text}");
    }

    // Passes go on every 250 ms; each refusal was logged once, naming its file.
    let (cpu, rss) = (up.cpu_time(), up.rss());
    tokio::time::sleep(Duration::from_secs(5)).await;
    eprintln!(
        "with a {huge_size}-byte manifest in the folder: skiff up used {:?} of CPU in 5 s; RSS {} MiB now ({} MiB \
         before), peak {} MiB",
        up.cpu_time() - cpu,
        up.rss() >> 20,
        rss >> 20,
        up.peak_rss() >> 20
    );
    let logs: Vec<String> = up.logs.try_iter().collect();
    for file in ["huge.yaml", "latin1.yaml", "shadow.yaml"] {
        let said: Vec<&String> = logs.iter().filter(|l| l.contains("refused") && l.contains(file)).collect();
        assert_eq!(said.len(), 1, "{file} refused in the log: {said:#?}");
        assert!(said[0].contains("WARN"), "{}", said[0]);
    }
    assert!(!logs.iter().any(|l| l.contains(SECRET)), "the log shows the secret");

    // A fixed file is read again and served.
    std::fs::write(path.join("latin1.yaml"), manifest("other", "iris", "minReplicas: 1")).unwrap();
    up.wait_for("the fixed file served", Duration::from_secs(60), |s| ready(s, "other")).await;
    assert!(up.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_app_gives_two_namespaces_two_files() {
    let dir = folder(&["iris"]);
    let up = Up::start(dir.path(), CONFIG);
    let base = format!("http://{}/models", up.admin);
    let browser = Browser::start("skiff-up-namespaces").await;
    let dir_ref = &dir;
    browser
        .run(async |b| {
            // Through the app's own create page (its script carries whatever CSRF token the app wants).
            for (namespace, name) in [("default", "team-a-coll"), ("team-a", "coll")] {
                b.open(&format!("{base}/new?ns={namespace}"), &format!("new-{namespace}")).await;
                let text = manifest(name, "iris", "minReplicas: 0");
                b.client
                    .execute("document.querySelector('#yaml').value = arguments[0];", vec![text.into()])
                    .await
                    .unwrap();
                b.click("#create").await;
                b.wait_text("h1", "the detail page", |t| t.starts_with(name)).await;
                b.shot(&format!("created-{namespace}")).await;
            }
        })
        .await;
    for file in ["team-a-coll.yaml", "team-a__coll.yaml"] {
        assert!(dir_ref.path().join(file).is_file(), "{file} was not written");
    }
    let status = up
        .wait_for("both listed", Duration::from_secs(30), |s| {
            names(s).len() == 2 && s["errors"] == serde_json::json!([])
        })
        .await;
    assert_eq!(names(&status), ["default/team-a-coll", "team-a/coll"]);
    assert!(up.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misspelt_field_is_a_warning_and_with_strict_a_refusal() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    let file = path.join("iris.yaml");
    std::fs::write(&file, manifest("iris", "iris", "minReplica: 0")).unwrap();
    let warning = format!("{}: unknown field \"spec.predictor.minReplica\"", file.display());

    let up = Up::start(path, CONFIG);
    let status = up.wait_for("iris ready", Duration::from_secs(60), |s| ready(s, "iris")).await;
    assert_eq!(status["warnings"], serde_json::json!([warning]));
    assert_eq!(status["errors"], serde_json::json!([]));
    let table = skiff_get(&up, &[]);
    assert!(table.lines().any(|line| line == format!("warning: {warning}")), "{table}");
    let index =
        send(http::Method::GET, &format!("http://{}/models/?ns=default", up.admin), Bytes::new(), &[]).await.unwrap();
    let index = String::from_utf8_lossy(&index.body).into_owned();
    assert!(index.contains("unknown field &quot;spec.predictor.minReplica&quot;"), "{index}");
    let logs: Vec<String> = up.logs.try_iter().collect();
    let said: Vec<&String> = logs.iter().filter(|l| l.contains("unknown field")).collect();
    assert!(said.len() == 1 && said[0].contains("WARN") && said[0].contains("spec.predictor.minReplica"), "{said:#?}");
    assert!(up.stop().success());

    let up = Up::start_with(path, CONFIG, &[], &["--strict"]);
    let status = up
        .wait_for("the refusal", Duration::from_secs(60), |s| s["errors"].as_array().is_some_and(|e| e.len() == 1))
        .await;
    assert_eq!(names(&status), Vec::<String>::new());
    let refusal = status["errors"][0].as_str().unwrap();
    let named = format!("{}: spec.predictor.minReplica: unknown field", file.display());
    assert!(refusal.starts_with(&named) && refusal.contains("--strict"), "{refusal}");
    assert_eq!(status["warnings"], serde_json::json!([]));
    assert!(skiff_get(&up, &[]).contains(&format!("refused: {named}")));

    // Spelt right, the same file is served under --strict.
    std::fs::write(&file, manifest("iris", "iris", "minReplicas: 0")).unwrap();
    up.wait_for("iris served", Duration::from_secs(60), |s| ready(s, "iris") && s["errors"] == serde_json::json!([]))
        .await;
    assert!(up.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_file_with_a_served_name_is_refused_and_the_first_keeps_it() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    let (original, copy) = (path.join("iris.yaml"), path.join("iris-dup.yaml"));
    std::fs::write(&original, manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let up = Up::start(path, CONFIG);
    up.wait_for("iris ready", Duration::from_secs(60), |s| ready(s, "iris")).await;

    // The copy sorts before the original: it used to take the name and get the original refused.
    std::fs::write(&copy, manifest("iris", "iris", "minReplicas: 2")).unwrap();
    let refusal = format!(
        "{}: metadata.name: default/iris is already defined in {}, which keeps it",
        copy.display(),
        original.display()
    );
    let status = up
        .wait_for("the copy refused", Duration::from_secs(60), |s| s["errors"].as_array().is_some_and(|e| e.len() == 1))
        .await;
    assert!(status["errors"][0].as_str().unwrap().starts_with(&refusal), "{status:#}");
    let service = &status["services"][0];
    assert_eq!(
        (&service["file"], &service["latestCreatedRevision"]),
        (&json!(original.display().to_string()), &json!("iris-predictor-00001"))
    );
    assert_eq!(up.infer("iris").await.unwrap().status, StatusCode::OK);
    assert!(skiff_get(&up, &[]).contains(&format!("refused: {refusal}")));
    let logs: Vec<String> = up.logs.try_iter().collect();
    assert_eq!(logs.iter().filter(|l| l.contains("already defined")).count(), 1, "{logs:#?}");

    // The original removed, the copy takes the name (its spec: a new revision).
    std::fs::remove_file(&original).unwrap();
    let status = up
        .wait_for("the copy served", Duration::from_secs(60), |s| {
            s["services"][0]["file"] == json!(copy.display().to_string()) && s["errors"] == json!([])
        })
        .await;
    assert_eq!(status["services"][0]["latestCreatedRevision"], "iris-predictor-00002");
    assert!(up.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_storage_uri_that_does_not_parse_shows_no_credential() {
    let dir = folder(&["iris"]);
    let path = dir.path();
    std::fs::write(path.join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let bad = [
        ("port", "https://alice:PASSWORD@h.example:99999/m.onnx?X-Amz-Signature=SIGNATURE"),
        ("host", "https://alice:PASSWORD@[::1/m.onnx?X-Amz-Credential=AKIA&X-Amz-Signature=SIGNATURE"),
    ];
    for (name, uri) in bad {
        let text = manifest(name, "unused", "minReplicas: 1").replace("file://./models/unused", &format!("'{uri}'"));
        std::fs::write(path.join(format!("{name}.yaml")), text).unwrap();
    }
    let up = Up::start(path, CONFIG);
    let status = up
        .wait_for("iris ready and two refusals", Duration::from_secs(60), |s| {
            ready(s, "iris") && s["errors"].as_array().is_some_and(|e| e.len() == 2)
        })
        .await;
    let errors = status["errors"].to_string();
    assert!(errors.contains("port.yaml") && errors.contains("https://h.example:99999/m.onnx?…"), "{errors}");
    assert!(errors.contains("host.yaml") && errors.contains("https://[::1/m.onnx?…"), "{errors}");
    let table = skiff_get(&up, &[]);
    assert!(table.contains("port.yaml") && table.contains("host.yaml"), "{table}");
    let json = skiff_get(&up, &["-o", "json"]);
    let index =
        send(http::Method::GET, &format!("http://{}/models/?ns=default", up.admin), Bytes::new(), &[]).await.unwrap();
    let index = String::from_utf8_lossy(&index.body).into_owned();
    assert!(index.contains("port.yaml") && index.contains("host.yaml"), "{index}");
    let logs: Vec<String> = up.logs.try_iter().collect();
    assert!(logs.iter().any(|l| l.contains("port.yaml")), "the refusal is logged");
    let logs = logs.join("\n");
    for (what, text) in [
        ("the status", &errors),
        ("skiff get", &table),
        ("skiff get -o json", &json),
        ("the web index", &index),
        ("the log", &logs),
    ] {
        for secret in ["PASSWORD", "SIGNATURE", "AKIA", "alice"] {
            assert!(!text.contains(secret), "{what} shows {secret}: {text}");
        }
    }
    assert!(up.stop().success());
}

/// A request logger aimed at skiff up's own router or admin endpoint is refused, naming the field
/// and the listener; a logger aimed at another loopback port is accepted (standalone mode allows
/// loopback sinks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_logger_may_not_post_to_skiffs_own_ports() {
    let dir = folder(&["iris"]);
    let up = Up::start(dir.path(), CONFIG);
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let sinks = [
        ("to-admin", format!("http://127.0.0.1:{}/status", up.admin.port())),
        ("to-router", format!("http://localhost:{}/v2/models/iris/infer", up.addr.port())),
        ("to-sink", format!("http://{other}/events")),
    ];
    for (name, url) in &sinks {
        let text = manifest(name, "iris", &format!("minReplicas: 0\nlogger: {{url: \"{url}\"}}"));
        std::fs::write(dir.path().join(format!("{name}.yaml")), text).unwrap();
    }
    let status = up
        .wait_for("two loggers refused, one accepted", Duration::from_secs(30), |s| {
            names(s) == ["default/to-sink"] && s["errors"].as_array().is_some_and(|e| e.len() == 2)
        })
        .await;
    let errors: Vec<&str> = status["errors"].as_array().unwrap().iter().map(|e| e.as_str().unwrap()).collect();
    let refusal = |file: &str, url: &str, what: &str| {
        format!("{}: spec.predictor.logger.url: {url} is skiff up's own {what} (", dir.path().join(file).display())
    };
    assert!(errors[0].starts_with(&refusal("to-admin.yaml", &sinks[0].1, "admin endpoint")), "{errors:?}");
    assert!(errors[1].starts_with(&refusal("to-router.yaml", &sinks[1].1, "router")), "{errors:?}");
    assert!(errors.iter().all(|e| e.contains("a request logger may not post to Skiff's own ports")), "{errors:?}");
}
