//! `skiff up --config FILE`: the standalone settings, one YAML file.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use skiff_api::image::ImageMap;
use skiff_autoscaler::AutoscalerConfig;

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
    /// The programs custom containers' images name (`skiff up --image-map`; empty by default).
    pub images: ImageMap,
}

impl Default for UpConfig {
    fn default() -> Self {
        UpConfig {
            domain: "example.com".into(),
            autoscaler: AutoscalerConfig::default(),
            max_pending: 1000,
            images: ImageMap::default(),
        }
    }
}

impl UpConfig {
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
        })
    }

    /// How often the controller rereads the folder and reconciles.
    pub fn reconcile_interval(&self) -> Duration {
        Duration::from_millis(250)
    }
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
}
