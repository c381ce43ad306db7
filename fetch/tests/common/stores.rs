//! Real stores started by the tests, as `tests/stores/README.md` says: MinIO (S3) and
//! fake-gcs-server (GCS), built from their Go modules by `tests/stores/build.sh` (cached), and
//! `tests/stores/hf_hub.py` (the Hugging Face Hub's layout). Each listens on 127.0.0.1 on a free
//! port, keeps its data in a temporary folder and is killed when dropped.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// MinIO's root user and password: the access key and secret the tests sign with.
pub const S3_KEY: (&str, &str) = ("skiffadmin", "skiffsecret");

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The folder holding `minio` and `fake-gcs-server` (built once, then cached).
pub fn bin_dir() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(repo().join("tests/stores/build.sh"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run tests/stores/build.sh");
        assert!(out.status.success(), "tests/stores/build.sh failed");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

/// A store process and its data.
pub struct Store {
    child: Child,
    /// Its base URL, `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its data folder.
    pub data: tempfile::TempDir,
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `output`'s lines on a thread until `find` gives a value; the rest are drained.
fn watch<R: std::io::Read + Send + 'static>(
    output: R,
    find: impl Fn(&str) -> Option<String> + Send + 'static,
) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines().map_while(Result::ok) {
            if let Some(found) = find(&line) {
                let _ = tx.send(found);
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the store did not say where it listens")
}

fn wait_ok(url: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let ok = Command::new("curl").args(["-fsS", "-o", "/dev/null", url]).status().is_ok_and(|s| s.success());
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{url} did not answer 200");
}

/// MinIO with the buckets `buckets`, each holding `objects` (bucket, key, bytes) after start.
pub fn minio(buckets: &[&str]) -> Store {
    let data = tempfile::tempdir().unwrap();
    for bucket in buckets {
        std::fs::create_dir_all(data.path().join(bucket)).unwrap();
    }
    let mut child = Command::new(bin_dir().join("minio"))
        .args(["server"])
        .arg(data.path())
        .args(["--address", "127.0.0.1:0", "--anonymous"])
        .env("MINIO_ROOT_USER", S3_KEY.0)
        .env("MINIO_ROOT_PASSWORD", S3_KEY.1)
        .env("MINIO_BROWSER", "off")
        .env("MINIO_UPDATE", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start minio");
    let port = watch(child.stderr.take().unwrap(), |line| {
        line.trim().strip_prefix("API: http://127.0.0.1:").map(|p| p.split_whitespace().next().unwrap_or("").to_owned())
    });
    let url = format!("http://127.0.0.1:{port}");
    wait_ok(&format!("{url}/minio/health/live"));
    Store { child, url, data }
}

impl Store {
    /// The environment KServe's storage initializer reads for this MinIO, signed with `key`.
    pub fn s3_env(&self, key: (&str, &str)) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.url.as_str()),
            ("AWS_ACCESS_KEY_ID", key.0),
            ("AWS_SECRET_ACCESS_KEY", key.1),
            ("AWS_REGION", "us-east-1"),
            ("S3_VERIFY_SSL", "0"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
    }

    /// Puts `bytes` at `bucket/key` of this MinIO (curl signs SigV4).
    pub fn s3_put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let file = self.data.path().join(".upload");
        std::fs::write(&file, bytes).unwrap();
        let status = Command::new("curl")
            .args(["-fsS", "-o", "/dev/null", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user"])
            .arg(format!("{}:{}", S3_KEY.0, S3_KEY.1))
            .arg("-T")
            .arg(&file)
            .arg(format!("{}/{bucket}/{key}", self.url))
            .status()
            .unwrap();
        assert!(status.success(), "upload {bucket}/{key}");
    }

    /// Makes `bucket` readable and listable by anyone.
    pub fn s3_public(&self, bucket: &str) {
        let policy = format!(
            r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"AWS":["*"]}},"Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::{bucket}","arn:aws:s3:::{bucket}/*"]}}]}}"#
        );
        let file = self.data.path().join(".policy");
        std::fs::write(&file, policy).unwrap();
        let status = Command::new("curl")
            .args(["-fsS", "-o", "/dev/null", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user"])
            .arg(format!("{}:{}", S3_KEY.0, S3_KEY.1))
            .arg("-T")
            .arg(&file)
            .arg(format!("{}/{bucket}?policy=", self.url))
            .status()
            .unwrap();
        assert!(status.success(), "policy of {bucket}");
    }
}

/// fake-gcs-server serving `objects` (bucket, name, bytes), loaded from a folder at start.
pub fn fake_gcs(objects: &[(&str, &str, &[u8])]) -> Store {
    let data = tempfile::tempdir().unwrap();
    for (bucket, name, bytes) in objects {
        let path = data.path().join(bucket).join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let child = Command::new(bin_dir().join("fake-gcs-server"))
        .args(["-scheme", "http", "-host", "127.0.0.1", "-port", &port.to_string(), "-public-host", "127.0.0.1"])
        .args(["-external-url", &url, "-backend", "memory", "-log-level", "warn", "-data"])
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fake-gcs-server");
    wait_ok(&format!("{url}/storage/v1/b"));
    Store { child, url, data }
}

/// `hf_hub.py` serving the repositories `files` (`org/repo/path`, bytes), with `args`
/// (`--token T`, `--cut-after N`).
pub fn hf_hub(files: &[(&str, &[u8])], args: &[&str]) -> Store {
    let data = tempfile::tempdir().unwrap();
    for (path, bytes) in files {
        let path = data.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let mut child = Command::new("python3")
        .arg(repo().join("tests/stores/hf_hub.py"))
        .arg("--root")
        .arg(data.path())
        .args(["--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start hf_hub.py");
    let url = watch(child.stdout.take().unwrap(), |line| line.strip_prefix("listening on ").map(str::to_owned));
    Store { child, url, data }
}
