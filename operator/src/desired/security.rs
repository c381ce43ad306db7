//! The security settings of a revision's pod: Kubernetes' `restricted` Pod Security profile by
//! default (non-root, seccomp `RuntimeDefault`, no privilege escalation, every capability
//! dropped), and a read-only root filesystem with an emptyDir at `/tmp` for the containers Skiff
//! chooses the image of (the model server and the storage initializer). What the predictor gives
//! is laid over these defaults, key by key: a value the user wrote wins.

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec, Volume, VolumeMount};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The non-root user (and group) model pods run as by default.
pub const RUN_AS_USER: i64 = 65532;
/// The emptyDir that gives containers with a read-only root somewhere to write.
pub const SCRATCH_VOLUME: &str = "skiff-scratch";
/// Where it is mounted.
pub const SCRATCH_PATH: &str = "/tmp";

/// Gives a container Skiff picked the image of a read-only root filesystem (unless its
/// `securityContext` says otherwise) and the scratch volume at `/tmp` (unless it mounts something
/// there already).
pub fn read_only_root(container: &mut Container) -> Result<(), String> {
    container.security_context =
        Some(overlay_typed(json!({"readOnlyRootFilesystem": true}), &container.security_context)?);
    let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
    if !mounts.iter().any(|m| m.mount_path.trim_end_matches('/') == SCRATCH_PATH) {
        mounts.push(VolumeMount {
            name: SCRATCH_VOLUME.into(),
            mount_path: SCRATCH_PATH.into(),
            ..VolumeMount::default()
        });
    }
    Ok(())
}

/// Makes `/tmp` the home of a container whose image was not built for a read-only root (tools such
/// as the storage initializer keep caches under `$HOME`), unless it sets `HOME` itself.
pub fn scratch_home(container: &mut Container) {
    let env = container.env.get_or_insert_with(Vec::new);
    if !env.iter().any(|e| e.name == "HOME") {
        env.push(EnvVar { name: "HOME".into(), value: Some(SCRATCH_PATH.into()), ..EnvVar::default() });
    }
}

/// Lays the restricted profile under what the pod and each of its containers (init containers
/// included) set, and adds the scratch volume when a container mounts it. The pod runs as non-root
/// by default, unless the pod or a container asks for user 0 (which `runAsNonRoot` would refuse).
pub fn harden(pod: &mut PodSpec) -> Result<(), String> {
    let containers = || pod.init_containers.iter().flatten().chain(&pod.containers);
    let root = pod.security_context.as_ref().and_then(|c| c.run_as_user) == Some(0)
        || containers().any(|c| c.security_context.as_ref().and_then(|s| s.run_as_user) == Some(0));
    let scratch = containers().flat_map(|c| c.volume_mounts.iter().flatten()).any(|m| m.name == SCRATCH_VOLUME);
    let mut defaults =
        json!({"runAsUser": RUN_AS_USER, "runAsGroup": RUN_AS_USER, "seccompProfile": {"type": "RuntimeDefault"}});
    if !root {
        defaults["runAsNonRoot"] = true.into();
    }
    pod.security_context = Some(overlay_typed(defaults, &pod.security_context)?);
    let restricted = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
    for container in pod.init_containers.iter_mut().flatten().chain(&mut pod.containers) {
        container.security_context = Some(overlay_typed(restricted.clone(), &container.security_context)?);
    }
    if scratch && !pod.volumes.iter().flatten().any(|v| v.name == SCRATCH_VOLUME) {
        let volume = Volume { name: SCRATCH_VOLUME.into(), empty_dir: Some(Default::default()), ..Volume::default() };
        pod.volumes.get_or_insert_with(Vec::new).push(volume);
    }
    Ok(())
}

/// `given` laid over `defaults` as a k8s type; the error names the security context.
fn overlay_typed<T: Serialize + DeserializeOwned>(defaults: Value, given: &Option<T>) -> Result<T, String> {
    let given = serde_json::to_value(given).map_err(|e| format!("securityContext: {e}"))?;
    serde_json::from_value(overlay(defaults, given)).map_err(|e| format!("securityContext: {e}"))
}

/// `given` over `defaults`: objects merge key by key, any other value the user gave wins (a list
/// replaces the default list), and what the user left out (`null`) keeps the default.
fn overlay(defaults: Value, given: Value) -> Value {
    match (defaults, given) {
        (Value::Object(mut merged), Value::Object(given)) => {
            for (key, value) in given {
                let value = match merged.remove(&key) {
                    Some(default) => overlay(default, value),
                    None => value,
                };
                merged.insert(key, value);
            }
            Value::Object(merged)
        }
        (default, Value::Null) => default,
        (_, given) => given,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desired::testing::*;

    #[test]
    fn the_user_wins_key_by_key() {
        let defaults = json!({"a": 1, "caps": {"drop": ["ALL"]}, "keep": true});
        let given = json!({"a": 2, "caps": {"add": ["NET_BIND_SERVICE"]}, "keep": null});
        assert_eq!(
            overlay(defaults, given),
            json!({"a": 2, "caps": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}, "keep": true})
        );
        assert_eq!(overlay(json!({"drop": ["ALL"]}), json!({"drop": []})), json!({"drop": []}));
    }

    /// The container-level settings of Kubernetes' `restricted` profile.
    fn restricted(read_only_root: bool) -> serde_json::Value {
        let mut context = json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}});
        if read_only_root {
            context["readOnlyRootFilesystem"] = true.into();
        }
        context
    }

    #[test]
    fn model_pods_run_restricted_with_a_read_only_root_and_scratch_at_tmp() {
        let pod = pod_of(&build(&MODEL.replace("file:///models/iris", "gs://bucket/iris")).unwrap());
        assert_eq!(
            pod["securityContext"],
            json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}})
        );
        let scratch = json!({"name": "skiff-scratch", "mountPath": "/tmp"});
        for c in [&pod["containers"][0], &pod["initContainers"][0]] {
            assert_eq!(c["securityContext"], restricted(true), "{}", c["name"]);
            let mounts = c["volumeMounts"].as_array().unwrap();
            assert_eq!(mounts.last(), Some(&scratch), "{}: /tmp is mounted last", c["name"]);
        }
        assert_eq!(pod["initContainers"][0]["env"], json!([{"name": "HOME", "value": "/tmp"}]));
        let volumes = pod["volumes"].as_array().unwrap();
        assert!(volumes.contains(&json!({"name": "skiff-scratch", "emptyDir": {}})), "{volumes:?}");
    }

    #[test]
    fn what_the_predictor_sets_wins_over_the_restricted_defaults() {
        let own = format!(
            "{MODEL}    securityContext: {{runAsUser: 1000, seccompProfile: {{type: Localhost, localhostProfile: p.json}}}}\n"
        )
        .replace(
            "      resources:",
            "      securityContext: {readOnlyRootFilesystem: false, capabilities: {add: [NET_BIND_SERVICE]}}\n      resources:",
        );
        let pod = pod_of(&build(&own).unwrap());
        assert_eq!(
            pod["securityContext"],
            json!({"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 65532,
                   "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}})
        );
        assert_eq!(
            pod["containers"][0]["securityContext"],
            json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": false,
                   "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}})
        );
        let root = pod_of(&build(&format!("{MODEL}    securityContext: {{runAsUser: 0}}\n")).unwrap());
        assert!(root["securityContext"].get("runAsNonRoot").is_none(), "root asked for: not refused by runAsNonRoot");
        let mounted =
            MODEL.replace("      resources:", "      volumeMounts: [{name: own, mountPath: /tmp/}]\n      resources:");
        let mounted = format!("{mounted}    volumes: [{{name: own, emptyDir: {{}}}}]\n");
        let pod = pod_of(&build(&mounted).unwrap());
        let paths: Vec<&str> = pod["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect();
        assert_eq!(paths, ["own", "kserve-provision-location"], "a /tmp of its own is kept");
        assert!(pod["volumes"].as_array().unwrap().iter().all(|v| v["name"] != "skiff-scratch"));
    }

    #[test]
    fn custom_containers_and_init_containers_get_the_restricted_settings_but_keep_a_writable_root() {
        let pod = pod_of(
            &build("    initContainers: [{name: prep, image: busybox}]\n    containers:\n    - image: my/model:1\n")
                .unwrap(),
        );
        assert_eq!(pod["containers"][0]["securityContext"], restricted(false));
        assert_eq!(pod["initContainers"][0]["securityContext"], restricted(false));
        assert_eq!(pod["containers"][1]["securityContext"], restricted(true), "the queue-proxy");
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert!(pod.get("volumes").is_none(), "no scratch: nothing mounts it");
    }
}
