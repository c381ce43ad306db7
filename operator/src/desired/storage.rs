//! How the model reaches the container that serves it: its `storageUri` as a read-only volume
//! (a hostPath, a claim, or an emptyDir the storage initializer downloads into).

use k8s_openapi::api::core::v1::{Container, PodSpec, Volume, VolumeMount};
use serde_json::{Value, json};
use skiff_api::isvc::ModelSpec;

use super::security;
use crate::platform::Platform;
use crate::storage::{self, ModelSource};

/// KServe's name for the volume the model is provided in.
pub(super) const MODEL_VOLUME: &str = "kserve-provision-location";

/// Provides the model's `storageUri` to `container` at `dir`, read-only: `file://` as a hostPath
/// volume (where the platform allows it), `pvc://` as the claim's volume (its sub-path), anything
/// else downloaded by KServe's storage initializer (an init container) into an emptyDir.
pub(super) fn provision_model(
    model: &ModelSpec,
    dir: &str,
    platform: &Platform,
    pod: &mut PodSpec,
    container: &mut Container,
) -> Result<(), String> {
    let uri = model.storage_uri.as_deref().unwrap_or_default();
    let source = storage::parse(uri).map_err(|e| format!("spec.predictor.model.storageUri: {e}"))?;
    if matches!(source, ModelSource::HostPath(_)) && !platform.allow_host_path {
        return Err(format!(
            "spec.predictor.model.storageUri: {uri}: file:// (a directory of the node, as a hostPath volume) is \
             refused on this cluster: inferenceservice-config key skiff sets allowHostPath to false; use pvc:// or \
             a scheme the storage initializer downloads"
        ));
    }
    let dir = dir.to_owned();
    let mount = |sub_path: Option<String>| VolumeMount {
        name: MODEL_VOLUME.into(),
        mount_path: dir.clone(),
        read_only: Some(true),
        sub_path,
        ..VolumeMount::default()
    };
    let (volume, mount) = match source {
        ModelSource::HostPath(path) => (volume(json!({"hostPath": {"path": path, "type": "Directory"}})), mount(None)),
        ModelSource::Pvc { claim, path } => (
            volume(json!({"persistentVolumeClaim": {"claimName": claim, "readOnly": true}})),
            mount((!path.is_empty()).then_some(path)),
        ),
        ModelSource::Download(uri) => {
            let mut init = Container {
                name: "storage-initializer".into(),
                image: Some(platform.storage_initializer_image.clone()),
                args: Some(vec![uri, dir.clone()]),
                volume_mounts: Some(vec![VolumeMount { read_only: None, ..mount(None) }]),
                ..Container::default()
            };
            security::read_only_root(&mut init)?;
            security::scratch_home(&mut init);
            pod.init_containers.get_or_insert_with(Vec::new).push(init);
            (volume(json!({"emptyDir": {}})), mount(None))
        }
    };
    pod.volumes.get_or_insert_with(Vec::new).push(volume);
    container.volume_mounts.get_or_insert_with(Vec::new).push(mount);
    Ok(())
}

fn volume(source: Value) -> Volume {
    let mut object = source.as_object().cloned().unwrap_or_default();
    object.insert("name".into(), MODEL_VOLUME.into());
    serde_json::from_value(Value::Object(object)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::desired::deployment;
    use crate::desired::testing::*;
    use crate::platform::Platform;

    #[test]
    fn a_pvc_is_mounted_with_its_sub_path_and_other_schemes_are_downloaded() {
        let d = build(&MODEL.replace("file:///models/iris", "pvc://models/iris/v1")).unwrap();
        let pod = pod_of(&d);
        assert_eq!(pod["volumes"][0]["persistentVolumeClaim"], json!({"claimName": "models", "readOnly": true}));
        assert_eq!(pod["containers"][0]["volumeMounts"][0]["subPath"], "iris/v1");

        let d = build(&MODEL.replace("file:///models/iris", "gs://bucket/iris")).unwrap();
        let pod = pod_of(&d);
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
        let init = &pod["initContainers"][0];
        assert_eq!(init["name"], "storage-initializer");
        assert_eq!(init["image"], crate::platform::DEFAULT_STORAGE_INITIALIZER_IMAGE);
        assert_eq!(init["args"], json!(["gs://bucket/iris", "/mnt/models"]));
        assert_eq!(init["volumeMounts"][0]["mountPath"], "/mnt/models");
        assert!(init["volumeMounts"][0].get("readOnly").is_none());
    }

    #[test]
    fn host_path_storage_is_refused_when_the_admin_says_so() {
        let closed = Platform { allow_host_path: false, ..Platform::default() };
        let refused = deployment(&revision(), &owner(), &predictor(MODEL), &record(), None, &closed, None).unwrap_err();
        assert!(refused.starts_with("spec.predictor.model.storageUri: file:///models/iris: file://"), "{refused}");
        assert!(refused.contains("inferenceservice-config key skiff sets allowHostPath to false"), "{refused}");
        let pvc = predictor(&MODEL.replace("file:///models/iris", "pvc://models/iris"));
        assert!(
            deployment(&revision(), &owner(), &pvc, &record(), None, &closed, None).is_ok(),
            "other schemes still serve"
        );
    }
}
