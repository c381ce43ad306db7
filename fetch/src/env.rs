//! Store settings from the environment, under KServe's storage-initializer names, read in one
//! place with every invalid value reported at once (linkerd's `env.rs`).
//!
//! - S3: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_ENDPOINT_URL` or
//!   `S3_ENDPOINT` (a host with or without a scheme), `S3_USE_HTTPS` (`0`: plain HTTP),
//!   `S3_VERIFY_SSL` (`0`: certificates unchecked), `AWS_REGION` or `AWS_DEFAULT_REGION`
//!   (default `us-east-1`). Without keys, requests are anonymous (public buckets).
//! - GCS: `GOOGLE_APPLICATION_CREDENTIALS` (a service account key file); `STORAGE_EMULATOR_HOST`
//!   (the emulator's base URL, as Google's clients read it). Without either, anonymous.
//! - Hugging Face: `HF_TOKEN`, `HF_ENDPOINT` (default `https://huggingface.co`).

use std::fmt;

use crate::error::{Error, Result};

/// A secret: shown as `***`, never in a log or an error.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// S3 settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S3Env {
    /// Key id and secret; `None`: anonymous.
    pub keys: Option<(String, Secret)>,
    /// A session token for temporary keys.
    pub session_token: Option<Secret>,
    /// The endpoint's URL (with its scheme); `None`: AWS.
    pub endpoint: Option<String>,
    /// The region.
    pub region: String,
    /// Whether certificates go unchecked (`S3_VERIFY_SSL=0`).
    pub insecure: bool,
}

/// Google Cloud Storage settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcsEnv {
    /// A service account key file.
    pub credentials_file: Option<String>,
    /// The emulator's base URL (`STORAGE_EMULATOR_HOST`).
    pub emulator: Option<String>,
}

/// Hugging Face Hub settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfEnv {
    /// The Hub's base URL.
    pub endpoint: String,
    /// A token for private or gated repositories.
    pub token: Option<Secret>,
}

/// Every store's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreEnv {
    /// S3.
    pub s3: S3Env,
    /// GCS.
    pub gcs: GcsEnv,
    /// Hugging Face.
    pub hf: HfEnv,
}

impl StoreEnv {
    /// From the process's environment.
    pub fn from_process() -> Result<StoreEnv> {
        StoreEnv::from_lookup(|name| std::env::var(name).ok())
    }

    /// From `lookup` (a variable's value by name); every invalid value is named in one error.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<StoreEnv> {
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut errors = Vec::new();
        let mut flag = |name: &str, default: bool| match get(name).as_deref() {
            None => default,
            Some("1" | "true" | "True" | "TRUE") => true,
            Some("0" | "false" | "False" | "FALSE") => false,
            Some(other) => {
                errors.push(format!("{name}={other:?}: expected 0 or 1"));
                default
            }
        };
        let use_https = flag("S3_USE_HTTPS", true);
        let verify = flag("S3_VERIFY_SSL", true);
        let keys = match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => Some((id, Secret(secret))),
            (None, None) => None,
            (Some(_), None) => {
                errors.push("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY".to_owned());
                None
            }
            (None, Some(_)) => {
                errors.push("AWS_SECRET_ACCESS_KEY is set without AWS_ACCESS_KEY_ID".to_owned());
                None
            }
        };
        let endpoint = get("AWS_ENDPOINT_URL").or_else(|| get("S3_ENDPOINT")).map(|host| {
            if host.contains("://") { host } else { format!("{}://{host}", if use_https { "https" } else { "http" }) }
        });
        let region = get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION")).unwrap_or_else(|| "us-east-1".into());
        let emulator =
            get("STORAGE_EMULATOR_HOST").map(|host| if host.contains("://") { host } else { format!("http://{host}") });
        let hf_endpoint =
            get("HF_ENDPOINT").unwrap_or_else(|| "https://huggingface.co".into()).trim_end_matches('/').to_owned();
        for (name, value) in [("AWS_ENDPOINT_URL or S3_ENDPOINT", &endpoint), ("STORAGE_EMULATOR_HOST", &emulator)] {
            if let Some(value) = value
                && url::Url::parse(value).is_err()
            {
                errors.push(format!("{name}={value:?}: not a URL"));
            }
        }
        if url::Url::parse(&hf_endpoint).is_err() {
            errors.push(format!("HF_ENDPOINT={hf_endpoint:?}: not a URL"));
        }
        if !errors.is_empty() {
            return Err(Error::Config(format!("store settings: {}", errors.join("; "))));
        }
        Ok(StoreEnv {
            s3: S3Env {
                keys,
                session_token: get("AWS_SESSION_TOKEN").map(Secret),
                endpoint,
                region,
                insecure: !verify,
            },
            gcs: GcsEnv { credentials_file: get("GOOGLE_APPLICATION_CREDENTIALS"), emulator },
            hf: HfEnv {
                endpoint: hf_endpoint,
                token: get("HF_TOKEN").or_else(|| get("HUGGING_FACE_HUB_TOKEN")).map(Secret),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<StoreEnv> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        StoreEnv::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn kserve_names_give_the_s3_settings() {
        let e = env(&[
            ("AWS_ACCESS_KEY_ID", "id"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
            ("S3_ENDPOINT", "127.0.0.1:9000"),
            ("S3_USE_HTTPS", "0"),
            ("S3_VERIFY_SSL", "0"),
            ("AWS_DEFAULT_REGION", "eu-west-1"),
        ])
        .unwrap();
        assert_eq!(e.s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(e.s3.region, "eu-west-1");
        assert!(e.s3.insecure);
        assert!(!format!("{e:?}").contains("SECRET"), "secrets are not shown");
        let anonymous = env(&[]).unwrap();
        assert_eq!(anonymous.s3.keys, None);
        assert_eq!(anonymous.hf.endpoint, "https://huggingface.co");
    }

    #[test]
    fn every_invalid_value_is_named_at_once() {
        let refusal = env(&[("S3_USE_HTTPS", "yes"), ("AWS_ACCESS_KEY_ID", "id"), ("HF_ENDPOINT", "not a url")])
            .unwrap_err()
            .to_string();
        assert!(refusal.contains("S3_USE_HTTPS=\"yes\": expected 0 or 1"), "{refusal}");
        assert!(refusal.contains("AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY"), "{refusal}");
        assert!(refusal.contains("HF_ENDPOINT=\"not a url\": not a URL"), "{refusal}");
    }
}
