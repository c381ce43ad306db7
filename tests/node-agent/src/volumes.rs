//! Volumes (pure planning): which host directory backs each volume, which files the
//! `configMap`, `secret`, `downwardAPI` and `projected` volumes hold, and which bind mounts each
//! container gets. Creating directories and writing files happens in [`crate::sandbox`].

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, Volume};

use crate::env::{PodFacts, RefData, field_ref};

/// Where a volume's content lives on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumePlan {
    /// A host path, used in place. `kind` is the hostPath `type` ("" when unset).
    HostPath {
        /// The host path.
        path: PathBuf,
        /// `DirectoryOrCreate`, `Directory`, `FileOrCreate`, `File`, `Socket`, ... or "".
        kind: String,
    },
    /// A fresh directory under the pod's directory, removed with the pod.
    EmptyDir {
        /// The directory.
        dir: PathBuf,
    },
    /// A directory of generated files (configMap, secret, downwardAPI, projected).
    Files {
        /// The directory.
        dir: PathBuf,
        /// Its files.
        files: Vec<FileItem>,
    },
}

impl VolumePlan {
    /// The host path a mount of this volume starts from.
    pub fn root(&self) -> &Path {
        match self {
            VolumePlan::HostPath { path, .. } => path,
            VolumePlan::EmptyDir { dir } | VolumePlan::Files { dir, .. } => dir,
        }
    }
}

/// One generated file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileItem {
    /// Path relative to the volume directory.
    pub path: String,
    /// Content.
    pub data: Vec<u8>,
    /// Permission bits.
    pub mode: u32,
}

/// A bind mount for a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// Host path.
    pub source: PathBuf,
    /// Path the container sees.
    pub target: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
}

/// Service account tokens, by `"<volume>/<path>"` of the projected source that asked for them.
pub type Tokens = BTreeMap<String, String>;

/// The token requests a pod's projected volumes need: (key in [`Tokens`], audience, expiration seconds).
pub fn token_requests(pod: &Pod) -> Vec<(String, Option<String>, Option<i64>)> {
    let mut out = Vec::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(t) = &src.service_account_token {
                out.push((format!("{}/{}", v.name, t.path), t.audience.clone(), t.expiration_seconds));
            }
        }
    }
    out
}

/// The ConfigMaps and Secrets a pod refers to in volumes, `env` and `envFrom`: (config maps, secrets).
pub fn referenced_objects(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let mut cms = Vec::new();
    let mut secrets = Vec::new();
    let Some(spec) = &pod.spec else { return (cms, secrets) };
    for v in spec.volumes.iter().flatten() {
        if let Some(c) = &v.config_map {
            cms.push(c.name.clone());
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.push(s);
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = &src.config_map {
                cms.push(c.name.clone());
            }
            if let Some(s) = &src.secret {
                secrets.push(s.name.clone());
            }
        }
    }
    for c in spec.init_containers.iter().flatten().chain(spec.containers.iter()) {
        for f in c.env_from.iter().flatten() {
            if let Some(r) = &f.config_map_ref {
                cms.push(r.name.clone());
            }
            if let Some(r) = &f.secret_ref {
                secrets.push(r.name.clone());
            }
        }
        for e in c.env.iter().flatten().filter_map(|e| e.value_from.as_ref()) {
            if let Some(r) = &e.config_map_key_ref {
                cms.push(r.name.clone());
            }
            if let Some(r) = &e.secret_key_ref {
                secrets.push(r.name.clone());
            }
        }
    }
    cms.sort();
    cms.dedup();
    secrets.sort();
    secrets.dedup();
    (cms, secrets)
}

fn safe_relative(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("invalid file path {path:?} in volume"));
    }
    Ok(())
}

/// Files from key/value data, through `items` when given (all keys otherwise).
fn key_files(
    data: Option<&BTreeMap<String, Vec<u8>>>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: u32,
    optional: bool,
    what: &str,
) -> Result<Vec<FileItem>, String> {
    let Some(data) = data else {
        return if optional { Ok(Vec::new()) } else { Err(format!("{what} not found")) };
    };
    match items {
        Some(items) => items
            .iter()
            .map(|i| {
                safe_relative(&i.path)?;
                let bytes = data.get(&i.key).ok_or_else(|| format!("{what}: no key {:?}", i.key))?;
                Ok(FileItem {
                    path: i.path.clone(),
                    data: bytes.clone(),
                    mode: i.mode.map(|m| m as u32).unwrap_or(default_mode),
                })
            })
            .collect(),
        None => {
            Ok(data.iter().map(|(k, v)| FileItem { path: k.clone(), data: v.clone(), mode: default_mode }).collect())
        }
    }
}

fn downward_files(
    pod: &Pod,
    items: &[k8s_openapi::api::core::v1::DownwardAPIVolumeFile],
    facts: &PodFacts,
    default_mode: u32,
) -> Result<Vec<FileItem>, String> {
    items
        .iter()
        .map(|i| {
            safe_relative(&i.path)?;
            let value = match &i.field_ref {
                Some(f) => field_ref(pod, &f.field_path, facts)?,
                None => return Err(format!("downwardAPI file {:?}: only fieldRef is supported", i.path)),
            };
            Ok(FileItem {
                path: i.path.clone(),
                data: value.into_bytes(),
                mode: i.mode.map(|m| m as u32).unwrap_or(default_mode),
            })
        })
        .collect()
}

/// Plans one volume under `pod_dir` (the pod's private directory on the host).
pub fn plan_volume(
    pod: &Pod,
    volume: &Volume,
    pod_dir: &Path,
    refs: &RefData,
    tokens: &Tokens,
    facts: &PodFacts,
) -> Result<VolumePlan, String> {
    let dir = pod_dir.join("volumes").join(&volume.name);
    if let Some(h) = &volume.host_path {
        return Ok(VolumePlan::HostPath { path: PathBuf::from(&h.path), kind: h.type_.clone().unwrap_or_default() });
    }
    if volume.empty_dir.is_some() {
        return Ok(VolumePlan::EmptyDir { dir });
    }
    let mode = |m: Option<i32>| m.map(|m| m as u32).unwrap_or(0o644);
    let files = if let Some(c) = &volume.config_map {
        key_files(
            refs.config_maps.get(&c.name),
            c.items.as_ref(),
            mode(c.default_mode),
            c.optional == Some(true),
            &format!("configmap {:?}", c.name),
        )?
    } else if let Some(s) = &volume.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        key_files(
            refs.secrets.get(&name),
            s.items.as_ref(),
            mode(s.default_mode),
            s.optional == Some(true),
            &format!("secret {name:?}"),
        )?
    } else if let Some(d) = &volume.downward_api {
        downward_files(pod, d.items.as_deref().unwrap_or_default(), facts, mode(d.default_mode))?
    } else if let Some(p) = &volume.projected {
        let default_mode = mode(p.default_mode);
        let mut files = Vec::new();
        for src in p.sources.iter().flatten() {
            if let Some(t) = &src.service_account_token {
                safe_relative(&t.path)?;
                let key = format!("{}/{}", volume.name, t.path);
                let token = tokens.get(&key).ok_or_else(|| format!("no service account token for {key}"))?;
                files.push(FileItem { path: t.path.clone(), data: token.clone().into_bytes(), mode: default_mode });
            } else if let Some(c) = &src.config_map {
                files.extend(key_files(
                    refs.config_maps.get(&c.name),
                    c.items.as_ref(),
                    default_mode,
                    c.optional == Some(true),
                    &format!("configmap {:?}", c.name),
                )?);
            } else if let Some(s) = &src.secret {
                files.extend(key_files(
                    refs.secrets.get(&s.name),
                    s.items.as_ref(),
                    default_mode,
                    s.optional == Some(true),
                    &format!("secret {:?}", s.name),
                )?);
            } else if let Some(d) = &src.downward_api {
                files.extend(downward_files(pod, d.items.as_deref().unwrap_or_default(), facts, default_mode)?);
            } else {
                return Err(format!("volume {:?}: unsupported projected source", volume.name));
            }
        }
        files
    } else {
        return Err(format!(
            "volume {:?}: unsupported type (the skiff node agent supports hostPath, emptyDir, configMap, secret, downwardAPI and projected)",
            volume.name
        ));
    };
    Ok(VolumePlan::Files { dir, files })
}

/// The bind mounts of one container, from its `volumeMounts`.
pub fn binds(container: &Container, plans: &BTreeMap<String, VolumePlan>) -> Result<Vec<Bind>, String> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let plan = plans.get(&m.name).ok_or_else(|| format!("volumeMount {:?}: no such volume", m.name))?;
            if m.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
                return Err(format!("volumeMount {:?}: subPathExpr is not supported", m.name));
            }
            let mut source = plan.root().to_path_buf();
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                safe_relative(sub)?;
                source = source.join(sub);
            }
            if !m.mount_path.starts_with('/') {
                return Err(format!("volumeMount {:?}: mountPath {:?} is not absolute", m.name, m.mount_path));
            }
            Ok(Bind { source, target: PathBuf::from(&m.mount_path), read_only: m.read_only == Some(true) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile, EmptyDirVolumeSource, HostPathVolumeSource,
        ObjectFieldSelector, PodSpec, ProjectedVolumeSource, ServiceAccountTokenProjection, VolumeMount,
        VolumeProjection,
    };
    use kube::api::ObjectMeta;

    fn api_access() -> Volume {
        Volume {
            name: "kube-api-access-x".into(),
            projected: Some(ProjectedVolumeSource {
                default_mode: Some(0o644),
                sources: Some(vec![
                    VolumeProjection {
                        service_account_token: Some(ServiceAccountTokenProjection {
                            path: "token".into(),
                            expiration_seconds: Some(3607),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        config_map: Some(ConfigMapProjection {
                            name: "kube-root-ca.crt".into(),
                            items: Some(vec![KeyToPath { key: "ca.crt".into(), path: "ca.crt".into(), mode: None }]),
                            optional: None,
                        }),
                        ..Default::default()
                    },
                    VolumeProjection {
                        downward_api: Some(DownwardAPIProjection {
                            items: Some(vec![DownwardAPIVolumeFile {
                                path: "namespace".into(),
                                field_ref: Some(ObjectFieldSelector {
                                    field_path: "metadata.namespace".into(),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }]),
                        }),
                        ..Default::default()
                    },
                ]),
            }),
            ..Default::default()
        }
    }

    fn pod(volumes: Vec<Volume>) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some("p".into()), namespace: Some("ns".into()), ..Default::default() },
            spec: Some(PodSpec { volumes: Some(volumes), ..Default::default() }),
            status: None,
        }
    }

    #[test]
    fn service_account_volume_files() {
        let v = api_access();
        let p = pod(vec![v.clone()]);
        assert_eq!(token_requests(&p), vec![("kube-api-access-x/token".to_string(), None, Some(3607))]);
        assert_eq!(referenced_objects(&p), (vec!["kube-root-ca.crt".to_string()], vec![]));
        let mut refs = RefData::default();
        refs.config_maps.insert("kube-root-ca.crt".into(), [("ca.crt".to_string(), b"PEM".to_vec())].into());
        let tokens: Tokens = [("kube-api-access-x/token".to_string(), "jwt".to_string())].into();
        let plan = plan_volume(&p, &v, Path::new("/pods/u"), &refs, &tokens, &PodFacts::default()).unwrap();
        let VolumePlan::Files { dir, files } = plan else { panic!() };
        assert_eq!(dir, PathBuf::from("/pods/u/volumes/kube-api-access-x"));
        let by: BTreeMap<_, _> = files.iter().map(|f| (f.path.as_str(), f.data.as_slice())).collect();
        assert_eq!(by["token"], b"jwt");
        assert_eq!(by["ca.crt"], b"PEM");
        assert_eq!(by["namespace"], b"ns");
        assert!(plan_volume(&p, &v, Path::new("/x"), &RefData::default(), &tokens, &PodFacts::default()).is_err());
    }

    #[test]
    fn host_path_empty_dir_and_binds() {
        let hp = Volume {
            name: "data".into(),
            host_path: Some(HostPathVolumeSource { path: "/srv/models".into(), type_: Some("Directory".into()) }),
            ..Default::default()
        };
        let ed =
            Volume { name: "scratch".into(), empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() };
        let p = pod(vec![hp.clone(), ed.clone()]);
        let mut plans = BTreeMap::new();
        for v in [&hp, &ed] {
            plans.insert(
                v.name.clone(),
                plan_volume(&p, v, Path::new("/pods/u"), &RefData::default(), &Tokens::new(), &PodFacts::default())
                    .unwrap(),
            );
        }
        assert_eq!(plans["data"], VolumePlan::HostPath { path: "/srv/models".into(), kind: "Directory".into() });
        let mount = |name: &str, path: &str, sub: Option<&str>, ro| VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            sub_path: sub.map(Into::into),
            read_only: Some(ro),
            ..Default::default()
        };
        let c = Container {
            volume_mounts: Some(vec![
                mount("data", "/mnt/models", Some("iris"), true),
                mount("scratch", "/tmp/s", None, false),
            ]),
            ..Default::default()
        };
        assert_eq!(
            binds(&c, &plans).unwrap(),
            vec![
                Bind { source: "/srv/models/iris".into(), target: "/mnt/models".into(), read_only: true },
                Bind { source: "/pods/u/volumes/scratch".into(), target: "/tmp/s".into(), read_only: false },
            ]
        );
        let bad =
            Container { volume_mounts: Some(vec![mount("data", "/x", Some("../etc"), false)]), ..Default::default() };
        assert!(binds(&bad, &plans).is_err());
        let unknown = Container { volume_mounts: Some(vec![mount("nope", "/x", None, false)]), ..Default::default() };
        assert!(binds(&unknown, &plans).is_err());
        let nfs = Volume { name: "n".into(), nfs: Some(Default::default()), ..Default::default() };
        assert!(
            plan_volume(&p, &nfs, Path::new("/p"), &RefData::default(), &Tokens::new(), &PodFacts::default())
                .unwrap_err()
                .contains("unsupported")
        );
    }
}
