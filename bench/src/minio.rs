//! A MinIO server for the storage benchmark, started as `tests/stores/README.md` says (built by
//! `tests/stores/build.sh`, cached): on 127.0.0.1 on the port it picks, its data in a folder,
//! killed when dropped; objects uploaded and read with curl, which signs SigV4 itself.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The root user and password: the access key and secret the peers sign with.
pub const KEY: (&str, &str) = ("skiffadmin", "skiffsecret");

/// A running MinIO.
pub struct Minio {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for Minio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Minio {
    /// Builds (or finds) MinIO and starts it on `data`, with a bucket folder for each of
    /// `buckets`; returns once its health check answers.
    pub fn start(repo: &Path, data: &Path, buckets: &[&str]) -> anyhow::Result<Minio> {
        let out = Command::new(repo.join("tests/stores/build.sh")).stderr(Stdio::inherit()).output()?;
        anyhow::ensure!(out.status.success(), "tests/stores/build.sh failed");
        let bin = String::from_utf8(out.stdout)?.trim().to_owned();
        for bucket in buckets {
            std::fs::create_dir_all(data.join(bucket))?;
        }
        let mut child = Command::new(Path::new(&bin).join("minio"))
            .arg("server")
            .arg(data)
            .args(["--address", "127.0.0.1:0", "--anonymous"])
            .env("MINIO_ROOT_USER", KEY.0)
            .env("MINIO_ROOT_PASSWORD", KEY.1)
            .env("MINIO_BROWSER", "off")
            .env("MINIO_UPDATE", "off")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the banner's `API: http://127.0.0.1:PORT ` line, then drains the rest.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(port) = line.trim().strip_prefix("API: http://127.0.0.1:") {
                    let _ = tx.send(port.split_whitespace().next().unwrap_or_default().to_owned());
                }
            }
        });
        let mut minio = Minio { child, url: String::new() };
        let port =
            rx.recv_timeout(Duration::from_secs(60)).map_err(|_| anyhow::anyhow!("MinIO printed no API line"))?;
        minio.url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !curl(&["-fsS", "-o", "/dev/null", &format!("{}/minio/health/live", minio.url)])? {
            anyhow::ensure!(Instant::now() < deadline, "MinIO at {} did not become healthy", minio.url);
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(minio)
    }

    /// KServe's storage-initializer variables for this MinIO (read by `skiff up`'s fetcher,
    /// `skiff-fetch` and `kserve-storage` alike).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.url.clone()),
            ("AWS_ACCESS_KEY_ID", KEY.0.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", KEY.1.to_owned()),
            ("AWS_REGION", "us-east-1".to_owned()),
            ("AWS_DEFAULT_REGION", "us-east-1".to_owned()),
            ("S3_VERIFY_SSL", "0".to_owned()),
        ]
    }

    /// Uploads `file` to `bucket/key`.
    pub fn put(&self, bucket: &str, key: &str, file: &Path) -> anyhow::Result<()> {
        let file = file.to_str().ok_or_else(|| anyhow::anyhow!("a path that is not UTF-8"))?;
        let url = format!("{}/{bucket}/{key}", self.url);
        anyhow::ensure!(curl(&signed(&["-fsS", "-o", "/dev/null", "-T", file, &url]))?, "uploading {url} failed");
        Ok(())
    }

    /// One curl stream of `bucket/key` into /dev/null: (bytes, seconds) as curl counts them.
    pub fn read_once(&self, bucket: &str, key: &str) -> anyhow::Result<(u64, f64)> {
        let url = format!("{}/{bucket}/{key}", self.url);
        let out = Command::new("curl")
            .args(signed(&["-fsS", "-o", "/dev/null", "-w", "%{size_download} %{time_total}", &url]))
            .output()?;
        anyhow::ensure!(out.status.success(), "reading {url} failed");
        let text = String::from_utf8(out.stdout)?;
        let mut fields = text.split_whitespace();
        let bytes = fields.next().and_then(|v| v.parse().ok());
        let seconds = fields.next().and_then(|v| v.parse().ok());
        bytes.zip(seconds).ok_or_else(|| anyhow::anyhow!("curl wrote {text:?}"))
    }
}

fn signed(args: &[&str]) -> Vec<String> {
    let mut all: Vec<String> =
        ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user"].iter().map(|s| (*s).to_owned()).collect();
    all.push(format!("{}:{}", KEY.0, KEY.1));
    all.extend(args.iter().map(|s| (*s).to_owned()));
    all
}

fn curl<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> anyhow::Result<bool> {
    Ok(Command::new("curl").args(args).stdout(Stdio::null()).status()?.success())
}
