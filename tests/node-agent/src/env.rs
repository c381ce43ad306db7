//! Container environment (pure): `env`, `envFrom`, `valueFrom` and `$(VAR)` expansion
//! ([`skiff_api::image::expand`]), the way the kubelet builds it. ConfigMaps and Secrets are
//! fetched beforehand by the caller and passed in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};
use skiff_api::image::expand;

/// Key/value data of the ConfigMaps and Secrets a pod refers to, by name (Secret values decoded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefData {
    /// ConfigMap name → key → bytes (`data` and `binaryData` together).
    pub config_maps: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    /// Secret name → key → decoded bytes.
    pub secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

/// Facts about the running pod that `fieldRef` can name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodFacts {
    /// `status.podIP`.
    pub pod_ip: String,
    /// `status.hostIP`.
    pub host_ip: String,
}

/// Builds the environment of `container`: `base` first (PATH, the service variables, ...), then
/// `envFrom`, then `env`. Returns the variables in order (later entries win), or a message for a
/// `CreateContainerConfigError`.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    facts: &PodFacts,
    refs: &RefData,
    base: &[(String, String)],
) -> Result<Vec<(String, String)>, String> {
    let mut vars: Vec<(String, String)> = base.to_vec();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        if let Some(cm) = &from.config_map_ref {
            match refs.config_maps.get(&cm.name) {
                Some(data) => vars.extend(data.iter().map(|(k, v)| (format!("{prefix}{k}"), text(v)))),
                None if cm.optional == Some(true) => {}
                None => return Err(format!("configmap {:?} not found", cm.name)),
            }
        }
        if let Some(s) = &from.secret_ref {
            match refs.secrets.get(&s.name) {
                Some(data) => vars.extend(data.iter().map(|(k, v)| (format!("{prefix}{k}"), text(v)))),
                None if s.optional == Some(true) => {}
                None => return Err(format!("secret {:?} not found", s.name)),
            }
        }
    }
    for var in container.env.iter().flatten() {
        if let Some(value) = env_value(pod, container, var, facts, refs, &vars)? {
            set(&mut vars, &var.name, value);
        }
    }
    Ok(dedup_last_wins(vars))
}

fn set(vars: &mut Vec<(String, String)>, name: &str, value: String) {
    vars.retain(|(k, _)| k != name);
    vars.push((name.to_string(), value));
}

fn dedup_last_wins(vars: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        out.retain(|(o, _)| *o != k);
        out.push((k, v));
    }
    out
}

/// One variable's value; `None` when an optional reference is missing (the variable is skipped).
fn env_value(
    pod: &Pod,
    container: &Container,
    var: &EnvVar,
    facts: &PodFacts,
    refs: &RefData,
    earlier: &[(String, String)],
) -> Result<Option<String>, String> {
    if let Some(value) = &var.value {
        return Ok(Some(expand(value, |name| lookup(earlier, name))));
    }
    let Some(from) = &var.value_from else {
        return Ok(Some(String::new()));
    };
    if let Some(f) = &from.field_ref {
        return field_ref(pod, &f.field_path, facts).map(Some);
    }
    if let Some(r) = &from.resource_field_ref {
        let resources = container.resources.as_ref();
        let (kind, name) = r.resource.split_once('.').unwrap_or(("limits", &r.resource));
        let table = match kind {
            "limits" => resources.and_then(|r| r.limits.as_ref()),
            _ => resources.and_then(|r| r.requests.as_ref()),
        };
        return match table.and_then(|t| t.get(name)) {
            Some(q) => Ok(Some(q.0.clone())),
            None => Err(format!(
                "resourceFieldRef {:?} is not set on the container (node defaults unsupported)",
                r.resource
            )),
        };
    }
    if let Some(k) = &from.config_map_key_ref {
        return match refs.config_maps.get(&k.name).and_then(|d| d.get(&k.key)) {
            Some(v) => Ok(Some(text(v))),
            None if k.optional == Some(true) => Ok(None),
            None => Err(format!("couldn't find key {} in ConfigMap {}", k.key, k.name)),
        };
    }
    if let Some(k) = &from.secret_key_ref {
        return match refs.secrets.get(&k.name).and_then(|d| d.get(&k.key)) {
            Some(v) => Ok(Some(text(v))),
            None if k.optional == Some(true) => Ok(None),
            None => Err(format!("couldn't find key {} in Secret {}", k.key, k.name)),
        };
    }
    Err(format!("env {:?}: unsupported valueFrom", var.name))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn lookup<'a>(vars: &'a [(String, String)], name: &str) -> Option<&'a str> {
    vars.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The value of a downward-API field path (also used by `downwardAPI` volumes).
pub fn field_ref(pod: &Pod, path: &str, facts: &PodFacts) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let subscript = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?.strip_prefix("['")?.strip_suffix("']")?;
        Some(rest.to_string())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()).unwrap_or_default(),
        "status.podIP" | "status.podIPs" => facts.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => facts.host_ip.clone(),
        "metadata.labels" => render_map(meta.labels.as_ref()),
        "metadata.annotations" => render_map(meta.annotations.as_ref()),
        _ => {
            if let Some(key) = subscript("metadata.labels") {
                meta.labels.as_ref().and_then(|l| l.get(&key)).cloned().unwrap_or_default()
            } else if let Some(key) = subscript("metadata.annotations") {
                meta.annotations.as_ref().and_then(|l| l.get(&key)).cloned().unwrap_or_default()
            } else {
                return Err(format!("unsupported fieldRef {path:?}"));
            }
        }
    };
    Ok(value)
}

/// `key="value"` lines, sorted, as the downward API writes label and annotation files.
fn render_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.into_iter().flatten().map(|(k, v)| format!("{k}={v:?}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ConfigMapEnvSource, ConfigMapKeySelector, EnvFromSource, EnvVarSource, ObjectFieldSelector, PodSpec,
    };
    use kube::api::ObjectMeta;
    use skiff_api::image::expand_all;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("ns".into()),
                labels: Some([("app".to_string(), "web".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec { node_name: Some("skiff-node".into()), ..Default::default() }),
            status: None,
        }
    }

    fn field(name: &str, path: &str) -> EnvVar {
        EnvVar {
            name: name.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector { field_path: path.into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn plain(name: &str, value: &str) -> EnvVar {
        EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
    }

    #[test]
    fn env_order_field_refs_and_expansion() {
        let c = Container {
            name: "c".into(),
            env: Some(vec![
                field("POD_NAME", "metadata.name"),
                field("POD_NS", "metadata.namespace"),
                field("POD_IP", "status.podIP"),
                field("APP", "metadata.labels['app']"),
                plain("URL", "http://$(POD_IP):8080/$(MISSING)"),
                plain("PATH", "/opt/bin:$(PATH)"),
            ]),
            ..Default::default()
        };
        let facts = PodFacts { pod_ip: "10.244.0.7".into(), host_ip: "10.244.0.1".into() };
        let base = vec![("PATH".to_string(), "/usr/bin".to_string())];
        let env = container_env(&pod(), &c, &facts, &RefData::default(), &base).unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("POD_NAME"), Some("web-1"));
        assert_eq!(get("POD_NS"), Some("ns"));
        assert_eq!(get("POD_IP"), Some("10.244.0.7"));
        assert_eq!(get("APP"), Some("web"));
        assert_eq!(get("URL"), Some("http://10.244.0.7:8080/$(MISSING)"));
        assert_eq!(get("PATH"), Some("/opt/bin:/usr/bin"));
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
        assert_eq!(expand_all(&["$(POD_NAME)".to_string()], &env), vec!["web-1".to_string()]);
    }

    #[test]
    fn config_map_refs_and_optional() {
        let mut refs = RefData::default();
        refs.config_maps.insert("cfg".into(), [("k".to_string(), b"v".to_vec())].into());
        let key = |name: &str, optional| EnvVar {
            name: "K".into(),
            value_from: Some(EnvVarSource {
                config_map_key_ref: Some(ConfigMapKeySelector { name: name.into(), key: "k".into(), optional }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = Container {
            env_from: Some(vec![EnvFromSource {
                prefix: Some("P_".into()),
                config_map_ref: Some(ConfigMapEnvSource { name: "cfg".into(), optional: None }),
                ..Default::default()
            }]),
            env: Some(vec![key("cfg", None)]),
            ..Default::default()
        };
        let env = container_env(&pod(), &c, &PodFacts::default(), &refs, &[]).unwrap();
        assert_eq!(env, vec![("P_k".to_string(), "v".to_string()), ("K".to_string(), "v".to_string())]);
        let missing = Container { env: Some(vec![key("nope", None)]), ..Default::default() };
        assert!(container_env(&pod(), &missing, &PodFacts::default(), &refs, &[]).unwrap_err().contains("nope"));
        let optional = Container { env: Some(vec![key("nope", Some(true))]), ..Default::default() };
        assert!(container_env(&pod(), &optional, &PodFacts::default(), &refs, &[]).unwrap().is_empty());
        assert!(field_ref(&pod(), "spec.bogus", &PodFacts::default()).is_err());
    }
}
