//! `skiff up`'s environment, read in one place and once (as `skiff_fetch::env` reads the stores'
//! settings): every variable `skiff up` (and `skiff cache`) acts on is named here, and nothing else
//! in `standalone` calls `std::env`.
//!
//! - `PATH`: where a runtime's program is looked for ([`super::runtimes::on_this_machine`]).
//! - `XDG_CACHE_HOME`, else `HOME`: the model cache's default folder ([`model_cache_dir`]).
//! - `RUST_LOG`: the filter the replicas are started with, beside the lines `skiff up` reads from
//!   them.
//! - `PROMETHEUS_URL`, `METRICS_SOURCE`: the models web app's metrics
//!   ([`skiff_web::config::Settings::from_env`]).
//! - The stores' variables (`AWS_*`, `S3_*`, `GOOGLE_APPLICATION_CREDENTIALS`,
//!   `STORAGE_EMULATOR_HOST`, `HF_*`: [`skiff_fetch::env::StoreEnv::from_process`]).
//!
//! Flags that clap may take from the environment (`--ort-dylib`'s `ORT_DYLIB_PATH`) are declared
//! with their flags.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

use skiff_fetch::env::StoreEnv;
use skiff_web::config::Settings;

/// The variables read as they are, at first use.
struct Process {
    path: Option<OsString>,
    xdg_cache_home: Option<OsString>,
    home: Option<OsString>,
    rust_log: Option<String>,
}

fn process() -> &'static Process {
    static PROCESS: OnceLock<Process> = OnceLock::new();
    PROCESS.get_or_init(|| Process {
        path: std::env::var_os("PATH"),
        xdg_cache_home: std::env::var_os("XDG_CACHE_HOME"),
        home: std::env::var_os("HOME"),
        rust_log: std::env::var("RUST_LOG").ok(),
    })
}

/// `PATH`.
pub fn path() -> Option<&'static OsString> {
    process().path.as_ref()
}

/// `RUST_LOG`.
pub fn rust_log() -> Option<&'static str> {
    process().rust_log.as_deref()
}

/// The model cache's folder unless told otherwise: `$XDG_CACHE_HOME/skiff/models`, else
/// `$HOME/.cache/skiff/models`.
pub fn model_cache_dir() -> PathBuf {
    let env = process();
    let base = env
        .xdg_cache_home
        .clone()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.home.as_ref().map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("skiff").join("models")
}

/// The models web app's settings from the environment.
pub fn web_settings() -> Result<Settings, String> {
    Settings::from_env(|name| std::env::var(name).ok()).map_err(|e| e.to_string())
}

/// The stores' settings.
pub fn stores() -> skiff_fetch::Result<StoreEnv> {
    StoreEnv::from_process()
}
