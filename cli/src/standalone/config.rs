//! `skiff up --config FILE`: the standalone settings, one YAML file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use skiff_api::image::ImageMap;
use skiff_api::runtime::ClusterServingRuntime;
use skiff_api::runtime::defaults::kserve_runtimes;
use skiff_autoscaler::AutoscalerConfig;

use super::restart::BackOff;
use crate::units::duration;

/// The file's shape. Every section and key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    /// Domain of service hosts, `<name>.<namespace>.<domain>`.
    domain: Option<String>,
    /// Knative `config-autoscaler` keys and values.
    #[serde(default)]
    autoscaler: BTreeMap<String, String>,
    /// Activator settings.
    #[serde(default)]
    activator: ActivatorFile,
    /// Replica settings.
    #[serde(default)]
    replicas: ReplicasFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReplicasFile {
    /// Wait before starting a replica again after the second failure in a row (`10s`, the
    /// kubelet's); the first is started again at once.
    restart_backoff: Option<String>,
    /// The longest wait (`5m`).
    max_restart_backoff: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ActivatorFile {
    max_pending: Option<usize>,
}

/// Standalone settings with their defaults applied.
#[derive(Debug, Clone)]
pub struct UpConfig {
    /// Host domain (default `example.com`, as KServe's).
    pub domain: String,
    /// Global autoscaler settings.
    pub autoscaler: AutoscalerConfig,
    /// Requests the activator holds per revision before answering 503.
    pub max_pending: usize,
    /// The programs containers' images name: the built-in map of KServe's Python runtimes
    /// ([`builtin_images`]), with `skiff up --image-map`'s entries over it.
    pub images: ImageMap,
    /// The runtimes a model the embedded server does not serve may run on: KServe's defaults
    /// ([`skiff_api::runtime::defaults`]), and those `skiff up --runtime` adds.
    pub runtimes: Vec<ClusterServingRuntime>,
    /// How replicas restart after failures (the kubelet's CrashLoopBackOff by default).
    pub restart_backoff: BackOff,
    /// Refuse a manifest with a field KServe does not have, instead of warning (`skiff up --strict`).
    pub strict: bool,
    /// Skiff's own listeners in this `skiff up` (what each is, its address): a request logger may
    /// not post to them.
    pub own_listeners: Vec<(&'static str, SocketAddr)>,
}

impl Default for UpConfig {
    fn default() -> Self {
        UpConfig {
            domain: "example.com".into(),
            autoscaler: AutoscalerConfig::default(),
            max_pending: 1000,
            images: builtin_images(),
            runtimes: kserve_runtimes().expect("the built-in runtimes parse (skiff-api's tests read them)"),
            restart_backoff: BackOff::default(),
            strict: false,
            own_listeners: Vec::new(),
        }
    }
}

impl UpConfig {
    /// Adds the ClusterServingRuntime in the YAML file at `path`; one of the same name replaces
    /// the default. The error names the file.
    pub fn add_runtime(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let runtime = skiff_api::runtime::cluster_serving_runtime_from_yaml(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if runtime.metadata.name.as_deref().unwrap_or_default().is_empty() {
            return Err(format!("{}: metadata.name: a ClusterServingRuntime needs a name", path.display()));
        }
        self.runtimes.retain(|r| r.metadata.name != runtime.metadata.name);
        self.runtimes.push(runtime);
        Ok(())
    }

    /// Reads the file, or the defaults when there is none.
    pub fn load(path: Option<&Path>) -> Result<UpConfig, String> {
        let Some(path) = path else { return Ok(UpConfig::default()) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file: File = serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let autoscaler =
            AutoscalerConfig::from_map(&file.autoscaler).map_err(|e| format!("{}: autoscaler.{e}", path.display()))?;
        let defaults = UpConfig::default();
        Ok(UpConfig {
            domain: file.domain.unwrap_or(defaults.domain),
            autoscaler,
            max_pending: file.activator.max_pending.unwrap_or(defaults.max_pending),
            images: defaults.images,
            runtimes: defaults.runtimes,
            restart_backoff: restart_backoff(&file.replicas)
                .map_err(|e| format!("{}: replicas.{e}", path.display()))?,
            strict: defaults.strict,
            own_listeners: defaults.own_listeners,
        })
    }

    /// How often the controller rereads the folder and reconciles.
    pub fn reconcile_interval(&self) -> Duration {
        Duration::from_millis(250)
    }
}

/// The back-off from the file's `replicas` section: each wait at least 1 ms, the first no longer than the longest.
fn restart_backoff(file: &ReplicasFile) -> Result<BackOff, String> {
    let defaults = BackOff::default();
    let read = |key: &str, value: &Option<String>, default: Duration| match value {
        None => Ok(default),
        Some(text) => match duration(text) {
            Ok(d) if d >= Duration::from_millis(1) => Ok(d),
            Ok(_) => Err(format!("{key}: {text} is less than 1ms")),
            Err(e) => Err(format!("{key}: {e}")),
        },
    };
    let initial = read("restartBackoff", &file.restart_backoff, defaults.initial)?;
    let max = read("maxRestartBackoff", &file.max_restart_backoff, defaults.max.max(initial))?;
    if initial > max {
        return Err(format!("restartBackoff: {initial:?} is more than maxRestartBackoff {max:?}"));
    }
    Ok(BackOff { initial, max, ..defaults })
}

/// KServe's Python runtimes `skiff up` runs as local commands, by image repository.
pub const PYTHON_RUNTIMES: [&str; 3] = ["sklearnserver", "xgbserver", "lgbserver"];

/// The image map `skiff up` starts from: `kserve/<runtime>` → `python3 -m <runtime>
/// --enable_grpc=false` for each of [`PYTHON_RUNTIMES`].
pub fn builtin_images() -> ImageMap {
    ImageMap::from_entries(PYTHON_RUNTIMES.map(|module| {
        let argv = ["python3", "-m", module, "--enable_grpc=false"].map(str::to_owned).to_vec();
        (format!("kserve/{module}"), argv)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_knative_keys_and_names_bad_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("skiff.yaml");
        std::fs::write(&path, "autoscaler:\n  stable-window: 6s\nactivator:\n  maxPending: 5\n").unwrap();
        let config = UpConfig::load(Some(&path)).unwrap();
        assert_eq!(config.autoscaler.stable_window, Duration::from_secs(6));
        assert_eq!(config.max_pending, 5);
        assert_eq!(config.domain, "example.com");
        std::fs::write(&path, "autoscaler:\n  stable-window: 2s\n").unwrap();
        let err = UpConfig::load(Some(&path)).unwrap_err();
        assert!(err.contains("autoscaler.stable-window"), "{err}");
        std::fs::write(&path, "autoscalr: {}\n").unwrap();
        assert!(UpConfig::load(Some(&path)).unwrap_err().contains("unknown field"));
    }

    #[test]
    fn the_restart_backoff_is_the_kubelets_unless_set() {
        assert_eq!(UpConfig::default().restart_backoff, BackOff::default());
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("skiff.yaml");
        std::fs::write(&path, "replicas:\n  restartBackoff: 500ms\n  maxRestartBackoff: 4s\n").unwrap();
        let backoff = UpConfig::load(Some(&path)).unwrap().restart_backoff;
        assert_eq!((backoff.initial, backoff.max), (Duration::from_millis(500), Duration::from_secs(4)));
        assert_eq!(backoff.reset_after, BackOff::default().reset_after);
        std::fs::write(&path, "replicas:\n  restartBackoff: 10m\n").unwrap();
        let alone = UpConfig::load(Some(&path)).unwrap().restart_backoff;
        assert_eq!((alone.initial, alone.max), (Duration::from_secs(600), Duration::from_secs(600)));
        std::fs::write(&path, "replicas:\n  restartBackoff: 1m\n  maxRestartBackoff: 1s\n").unwrap();
        assert!(UpConfig::load(Some(&path)).unwrap_err().contains("replicas.restartBackoff"));
        std::fs::write(&path, "replicas:\n  restartBackoff: 0s\n").unwrap();
        assert!(UpConfig::load(Some(&path)).unwrap_err().contains("less than 1ms"));
    }
}
