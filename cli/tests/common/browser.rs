//! A real headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`,
//! with `fantoccini`), for the web app's tests. Every page a test visits is saved as a screenshot
//! under `target/web-screenshots/<test>/`, and a failing test saves `failure.png` before it fails.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use futures::FutureExt;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

use super::repo;

/// How long a wait for something on a page lasts.
pub const WAIT: Duration = Duration::from_secs(60);

/// A chromedriver process and a browser session.
pub struct Browser {
    driver: Child,
    /// The session.
    pub client: Client,
    shots: PathBuf,
    count: u32,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn which(names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
            .map(|p| p.display().to_string())
    })
}

impl Browser {
    /// Starts chromedriver and a headless Chromium; screenshots go under `test`'s folder.
    pub async fn start(test: &str) -> Browser {
        Browser::start_with_args(test, &[]).await
    }

    /// [`Browser::start`] with more Chromium flags (e.g. `--host-resolver-rules=...`).
    pub async fn start_with_args(test: &str, extra: &[&str]) -> Browser {
        let driver_bin = which(&["chromedriver"]).expect("chromedriver is missing: apt-get install chromium-driver");
        let chromium = which(&["chromium", "chromium-browser"]).expect("chromium is missing: apt-get install chromium");
        let port = free_port();
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let mut args = vec![
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
        ];
        args.extend_from_slice(extra);
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("goog:chromeOptions".into(), json!({ "binary": chromium, "args": args }));
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(client) => break client,
                Err(e) if Instant::now() < deadline => {
                    tracing_wait(&e.to_string());
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no WebDriver session: {e}"),
            }
        };
        let shots = repo().join("target/web-screenshots").join(test);
        let _ = std::fs::remove_dir_all(&shots);
        std::fs::create_dir_all(&shots).unwrap();
        Browser { driver, client, shots, count: 0 }
    }

    /// Opens `url` and saves a screenshot named `name`.
    pub async fn open(&mut self, url: &str, name: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("opening {url}: {e}"));
        self.shot(name).await;
    }

    /// Saves a screenshot `NN-name.png`; returns its path.
    pub async fn shot(&mut self, name: &str) -> PathBuf {
        self.count += 1;
        let path = self.shots.join(format!("{:02}-{name}.png", self.count));
        if let Ok(png) = self.client.screenshot().await {
            let _ = std::fs::write(&path, png);
        }
        path
    }

    /// Writes a screenshot for the docs as `name` in the folder `SKIFF_SCREENSHOTS` names (relative to
    /// the repository); nothing without it, so that test runs do not rewrite tracked files.
    pub async fn doc_shot(&self, name: &str) {
        let Some(folder) = std::env::var_os("SKIFF_SCREENSHOTS") else { return };
        let path = super::repo().join(folder).join(name);
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        eprintln!("screenshot for the docs: {}", path.display());
    }

    /// Runs `steps`; if they panic, saves `failure.png` and the page's HTML, then fails.
    pub async fn run(mut self, steps: impl AsyncFnOnce(&mut Browser)) {
        let outcome = std::panic::AssertUnwindSafe(steps(&mut self)).catch_unwind().await;
        if let Err(panic) = outcome {
            let path = self.shots.join("failure.png");
            if let Ok(png) = self.client.screenshot().await {
                let _ = std::fs::write(&path, png);
            }
            if let Ok(html) = self.client.source().await {
                let _ = std::fs::write(self.shots.join("failure.html"), html);
            }
            eprintln!("screenshot of the failure: {}", path.display());
            self.close().await;
            std::panic::resume_unwind(panic);
        }
        self.close().await;
    }

    async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }

    /// The text of the first element matching `css`, once one exists.
    pub async fn text(&self, css: &str) -> String {
        let element = self.client.wait().at_most(WAIT).for_element(Locator::Css(css)).await;
        element.unwrap_or_else(|e| panic!("no {css} on the page: {e}")).text().await.unwrap()
    }

    /// Waits until the text of `css` satisfies `check`; returns it.
    pub async fn wait_text(&self, css: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if check(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}; {css} says {text:?}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Clicks the element matching `css`.
    pub async fn click(&self, css: &str) {
        let element = self.client.wait().at_most(WAIT).for_element(Locator::Css(css)).await;
        element.unwrap_or_else(|e| panic!("no {css} to click: {e}")).click().await.unwrap();
    }

    /// Types `text` into the element matching `css`, replacing what it holds.
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.client.wait().at_most(WAIT).for_element(Locator::Css(css)).await;
        let element = element.unwrap_or_else(|e| panic!("no {css} to fill: {e}"));
        element.clear().await.unwrap();
        element.send_keys(text).await.unwrap();
    }

    /// Runs `script` in the page (for things WebDriver has no verb for) and returns its value.
    pub async fn eval(&self, script: &str) -> serde_json::Value {
        self.client.execute(script, Vec::new()).await.unwrap()
    }
}

fn tracing_wait(error: &str) {
    if std::env::var_os("SKIFF_BROWSER_DEBUG").is_some() {
        eprintln!("waiting for chromedriver: {error}");
    }
}
