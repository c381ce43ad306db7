//! How the model reaches the container that serves it: its `storageUri` as a read-only volume
//! (a hostPath, a claim, or an emptyDir the storage initializer downloads into). The storage
//! initializer is Skiff's fetcher (`skiff-fetch URI DIR --node-cache URL`, the node cache's
//! Service, which sends each pod to its own node's cache) or the image `storageInitializer` names
//! (KServe's arguments only); [`crate::credentials`] adds the store's credentials from the pod's
//! ServiceAccount.

use k8s_openapi::api::core::v1::{Container, PodSpec, Volume, VolumeMount};
use serde_json::{Value, json};
use skiff_api::isvc::ModelSpec;

use super::security;
use crate::platform::{Initializer, Platform};
use crate::storage::{self, ModelSource};

/// KServe's name for the volume the model is provided in.
pub(super) const MODEL_VOLUME: &str = "kserve-provision-location";
pub use skiff_dataplane::failing::STORAGE_INITIALIZER;

/// Provides the model's `storageUri` to `container` at `dir`, read-only: `file://` as a hostPath
/// volume (where the platform allows it), `pvc://` as the claim's volume (its sub-path), anything
/// else downloaded by the storage initializer (an init container) into an emptyDir.
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
            let mut args = vec![uri, dir.clone()];
            let image = match &platform.initializer {
                Initializer::Skiff { image, node_cache } => {
                    if let Some(url) = node_cache {
                        args.extend(["--node-cache".to_owned(), url.clone()]);
                    }
                    image
                }
                Initializer::Kserve { image } => image,
            };
            let mut init = Container {
                name: STORAGE_INITIALIZER.into(),
                image: Some(image.clone()),
                args: Some(args),
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
    use crate::platform::{Initializer, Platform};

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
        assert_eq!(init["image"], crate::platform::DEFAULT_FETCH_IMAGE);
        assert_eq!(
            init["args"],
            json!([
                "gs://bucket/iris",
                "/mnt/models",
                "--node-cache",
                "http://skiff-model-cache.skiff-node.svc.cluster.local:8095"
            ]),
            "Skiff's fetcher asks the node cache first, through its node-local Service"
        );
        assert_eq!(init["volumeMounts"][0]["mountPath"], "/mnt/models");
        assert!(init["volumeMounts"][0].get("readOnly").is_none());
        assert_eq!(pod["containers"][0]["volumeMounts"][0]["readOnly"], true);
    }

    #[test]
    fn kserves_initializer_is_run_with_its_own_arguments_when_the_config_names_it() {
        let kserve = Platform {
            initializer: Initializer::Kserve { image: "kserve/storage-initializer:v0.15.2".into() },
            ..Platform::default()
        };
        let s3 = predictor(&MODEL.replace("file:///models/iris", "s3://models/iris"));
        let d = deployment(&revision(), &owner(), &s3, &record(), None, &kserve, None).unwrap();
        let init = &pod_of(&d)["initContainers"][0];
        assert_eq!(init["image"], "kserve/storage-initializer:v0.15.2");
        assert_eq!(init["args"], json!(["s3://models/iris", "/mnt/models"]));
        assert_eq!(init["args"].as_array().unwrap().len(), 2, "{init}");
        let no_cache = Platform {
            initializer: Initializer::Skiff { image: "fetch:1".into(), node_cache: None },
            ..Platform::default()
        };
        let d = deployment(&revision(), &owner(), &s3, &record(), None, &no_cache, None).unwrap();
        assert_eq!(pod_of(&d)["initContainers"][0]["args"], json!(["s3://models/iris", "/mnt/models"]));
    }

    #[test]
    fn a_downloading_pod_keeps_the_restricted_profile() {
        let d = build(&MODEL.replace("file:///models/iris", "s3://models/iris")).unwrap();
        let pod = pod_of(&d);
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        assert!(pod.get("hostNetwork").is_none() && pod.get("hostPID").is_none(), "{pod}");
        for volume in pod["volumes"].as_array().unwrap() {
            assert!(volume.get("hostPath").is_none(), "no hostPath: {volume}");
        }
        let init = &pod["initContainers"][0]["securityContext"];
        assert_eq!(init["allowPrivilegeEscalation"], false);
        assert_eq!(init["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(init["readOnlyRootFilesystem"], true);
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
