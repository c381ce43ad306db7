//! The store credentials of a model pod's storage initializer, as KServe's controller gives them
//! (`pkg/credentials`): the secrets the predictor's ServiceAccount lists, each read by its keys.
//!
//! - **S3**: a secret with `AWS_SECRET_ACCESS_KEY` gives `AWS_ACCESS_KEY_ID` and
//!   `AWS_SECRET_ACCESS_KEY` as `secretKeyRef`s (never their values), and from its annotations
//!   `serving.kserve.io/s3-endpoint` (`S3_ENDPOINT`, and `AWS_ENDPOINT_URL` with `https://`, or
//!   `http://` when `s3-usehttps` is `0`), `s3-usehttps` (`S3_USE_HTTPS`), `s3-verifyssl`
//!   (`S3_VERIFY_SSL`) and `s3-region` (`AWS_DEFAULT_REGION`, KServe's name).
//! - **GCS**: a secret with `gcloud-application-credentials.json` is mounted read-only at
//!   `/var/secrets/` (volume `user-gcp-sa`), and `GOOGLE_APPLICATION_CREDENTIALS` names the file.
//! - **Hugging Face**: a secret with `HF_TOKEN` gives `HF_TOKEN` as a `secretKeyRef`.
//!
//! A later secret's variable replaces an earlier one's of the same name (KServe merges S3's so).
//! Where Skiff differs from KServe: the key names are KServe's defaults (the `credentials` key
//! of `inferenceservice-config`, which renames them, is not read); the ServiceAccount's own
//! annotations (IAM roles, `s3-*` on the account) and Azure, generic `https` and `storage-config`
//! secrets give nothing; the credentials are read when a revision's Deployment is written, so a
//! changed secret reaches the next revision (its values, read by the kubelet at each pod start,
//! are always current).

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PodSpec, Secret, SecretKeySelector, SecretVolumeSource, ServiceAccount, Volume,
    VolumeMount,
};

use crate::desired::STORAGE_INITIALIZER;

/// KServe's annotation prefix on storage secrets.
const ANNOTATION: &str = "serving.kserve.io/";
/// The S3 secret keys (KServe's defaults in `inferenceservice-config`'s `credentials`).
const S3_KEYS: [&str; 2] = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"];
/// The GCS key file's name in its secret.
pub const GCS_KEY_FILE: &str = "gcloud-application-credentials.json";
/// Where the GCS key file's secret is mounted (KServe's path).
pub const GCS_MOUNT_PATH: &str = "/var/secrets/";
/// The GCS key file's volume (KServe's name).
const GCS_VOLUME: &str = "user-gcp-sa";
/// The Hugging Face token's key in its secret (and its variable).
const HF_TOKEN: &str = "HF_TOKEN";

/// What the storage initializer gets from the ServiceAccount's secrets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageCredentials {
    /// Its variables (secret values only as `secretKeyRef`s).
    pub env: Vec<EnvVar>,
    /// The pod's volumes for key files.
    pub volumes: Vec<Volume>,
    /// Their mounts in the storage initializer.
    pub mounts: Vec<VolumeMount>,
}

/// The names of the secrets `account` lists, in order.
pub fn secret_names(account: &ServiceAccount) -> Vec<String> {
    account.secrets.iter().flatten().filter_map(|s| s.name.clone()).collect()
}

/// The credentials `secrets` (those the ServiceAccount lists, in its order) give.
pub fn from_secrets(secrets: &[Secret]) -> StorageCredentials {
    let mut credentials = StorageCredentials::default();
    for secret in secrets {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let has = |key: &str| {
            secret.data.as_ref().is_some_and(|d| d.contains_key(key))
                || secret.string_data.as_ref().is_some_and(|d| d.contains_key(key))
        };
        if has(S3_KEYS[1]) {
            for key in S3_KEYS {
                credentials.set(reference(key, &name, key));
            }
            let annotation = |suffix: &str| {
                secret.metadata.annotations.as_ref().and_then(|a| a.get(&format!("{ANNOTATION}{suffix}"))).cloned()
            };
            let https = annotation("s3-usehttps");
            if let Some(https) = &https {
                credentials.set(value("S3_USE_HTTPS", https));
            }
            if let Some(endpoint) = annotation("s3-endpoint") {
                let scheme = if https.as_deref() == Some("0") { "http" } else { "https" };
                credentials.set(value("AWS_ENDPOINT_URL", &format!("{scheme}://{endpoint}")));
                credentials.set(value("S3_ENDPOINT", &endpoint));
            }
            if let Some(verify) = annotation("s3-verifyssl") {
                credentials.set(value("S3_VERIFY_SSL", &verify));
            }
            if let Some(region) = annotation("s3-region") {
                credentials.set(value("AWS_DEFAULT_REGION", &region));
            }
        } else if has(GCS_KEY_FILE) {
            if !credentials.volumes.iter().any(|v| v.name == GCS_VOLUME) {
                credentials.volumes.push(Volume {
                    name: GCS_VOLUME.into(),
                    secret: Some(SecretVolumeSource {
                        secret_name: Some(name.clone()),
                        ..SecretVolumeSource::default()
                    }),
                    ..Volume::default()
                });
                credentials.mounts.push(VolumeMount {
                    name: GCS_VOLUME.into(),
                    mount_path: GCS_MOUNT_PATH.into(),
                    read_only: Some(true),
                    ..VolumeMount::default()
                });
            }
            credentials.set(value("GOOGLE_APPLICATION_CREDENTIALS", &format!("{GCS_MOUNT_PATH}{GCS_KEY_FILE}")));
        } else if has(HF_TOKEN) {
            credentials.set(reference(HF_TOKEN, &name, HF_TOKEN));
        }
    }
    credentials
}

impl StorageCredentials {
    fn set(&mut self, var: EnvVar) {
        self.env.retain(|e| e.name != var.name);
        self.env.push(var);
    }

    /// Gives them to `pod`'s storage initializer; `false` when the pod has none.
    pub fn apply(&self, pod: &mut PodSpec) -> bool {
        let Some(init) = pod.init_containers.iter_mut().flatten().find(|c| c.name == STORAGE_INITIALIZER) else {
            return false;
        };
        merge(init, self);
        let volumes = pod.volumes.get_or_insert_with(Vec::new);
        for volume in &self.volumes {
            if !volumes.iter().any(|v| v.name == volume.name) {
                volumes.push(volume.clone());
            }
        }
        true
    }
}

fn merge(init: &mut Container, credentials: &StorageCredentials) {
    let env = init.env.get_or_insert_with(Vec::new);
    for var in &credentials.env {
        env.retain(|e| e.name != var.name);
        env.push(var.clone());
    }
    init.volume_mounts.get_or_insert_with(Vec::new).extend(credentials.mounts.iter().cloned());
}

fn value(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..EnvVar::default() }
}

fn reference(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.into(),
                key: key.into(),
                ..SecretKeySelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn secret(manifest: Value) -> Secret {
        serde_json::from_value(manifest).unwrap()
    }

    fn env_of(credentials: &StorageCredentials) -> Value {
        serde_json::to_value(&credentials.env).unwrap()
    }

    #[test]
    fn an_s3_secret_gives_references_to_its_keys_and_its_annotations_as_kserves_variables() {
        let s3 = secret(json!({
            "metadata": {"name": "minio", "annotations": {
                "serving.kserve.io/s3-endpoint": "10.244.0.1:9000",
                "serving.kserve.io/s3-usehttps": "0",
                "serving.kserve.io/s3-verifyssl": "0",
                "serving.kserve.io/s3-region": "eu-west-1",
                "unrelated": "x"
            }},
            "data": {"AWS_ACCESS_KEY_ID": "aWQ=", "AWS_SECRET_ACCESS_KEY": "c2VjcmV0LXZhbHVl"}
        }));
        let credentials = from_secrets(&[s3]);
        let reference =
            |name: &str| json!({"name": name, "valueFrom": {"secretKeyRef": {"name": "minio", "key": name}}});
        assert_eq!(
            env_of(&credentials),
            json!([
                reference("AWS_ACCESS_KEY_ID"),
                reference("AWS_SECRET_ACCESS_KEY"),
                {"name": "S3_USE_HTTPS", "value": "0"},
                {"name": "AWS_ENDPOINT_URL", "value": "http://10.244.0.1:9000"},
                {"name": "S3_ENDPOINT", "value": "10.244.0.1:9000"},
                {"name": "S3_VERIFY_SSL", "value": "0"},
                {"name": "AWS_DEFAULT_REGION", "value": "eu-west-1"},
            ])
        );
        let shown = serde_json::to_string(&credentials.env).unwrap();
        assert!(!shown.contains("c2VjcmV0LXZhbHVl") && !shown.contains("secret-value"), "no value is copied");
        let https = secret(
            json!({"metadata": {"name": "aws", "annotations": {"serving.kserve.io/s3-endpoint": "s3.example.com"}},
            "stringData": {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s"}}),
        );
        assert_eq!(
            env_of(&from_secrets(&[https]))[2],
            json!({"name": "AWS_ENDPOINT_URL", "value": "https://s3.example.com"})
        );
    }

    #[test]
    fn gcs_key_files_are_mounted_and_hugging_face_tokens_referenced_and_other_secrets_ignored() {
        let gcs = secret(json!({"metadata": {"name": "gcp"}, "data": {"gcloud-application-credentials.json": "e30="}}));
        let hf = secret(json!({"metadata": {"name": "hub"}, "data": {"HF_TOKEN": "aGY="}}));
        let docker = secret(json!({"metadata": {"name": "pull"}, "data": {".dockerconfigjson": "e30="}}));
        let credentials = from_secrets(&[gcs, docker, hf]);
        assert_eq!(
            env_of(&credentials),
            json!([
                {"name": "GOOGLE_APPLICATION_CREDENTIALS", "value": "/var/secrets/gcloud-application-credentials.json"},
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "HF_TOKEN"}}},
            ])
        );
        assert_eq!(
            serde_json::to_value(&credentials.volumes).unwrap(),
            json!([{"name": "user-gcp-sa", "secret": {"secretName": "gcp"}}])
        );
        assert_eq!(
            serde_json::to_value(&credentials.mounts).unwrap(),
            json!([{"name": "user-gcp-sa", "mountPath": "/var/secrets/", "readOnly": true}])
        );
    }

    #[test]
    fn the_storage_initializer_alone_gets_them_and_a_later_secret_wins() {
        let first = secret(json!({"metadata": {"name": "a"}, "data": {"HF_TOKEN": "YQ=="}}));
        let second = secret(json!({"metadata": {"name": "b"}, "data": {"HF_TOKEN": "Yg=="}}));
        let credentials = from_secrets(&[first, second]);
        let mut pod: PodSpec = serde_json::from_value(json!({
            "containers": [{"name": "kserve-container"}],
            "initContainers": [{"name": "storage-initializer", "env": [{"name": "HOST_IP", "value": "x"}, {"name": "HF_TOKEN", "value": "stale"}]}]
        }))
        .unwrap();
        assert!(credentials.apply(&mut pod));
        let pod = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            pod["initContainers"][0]["env"],
            json!([{"name": "HOST_IP", "value": "x"}, {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "b", "key": "HF_TOKEN"}}}])
        );
        assert!(pod["containers"][0].get("env").is_none(), "the model server gets no credentials");
        let mut without: PodSpec =
            serde_json::from_value(json!({"containers": [{"name": "kserve-container"}]})).unwrap();
        assert!(!credentials.apply(&mut without));
    }
}
