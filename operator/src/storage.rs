//! Where a model comes from (`storageUri`) and how the pod gets it: `file://` as a hostPath volume,
//! `pvc://<claim>/<path>` as the claim's volume, anything else through KServe's storage initializer
//! into an emptyDir.

use skiff_api::storage::ModelUri;

/// How a revision's pod reaches its model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSource {
    /// A directory on the node (`file:///abs/path`).
    HostPath(String),
    /// A PersistentVolumeClaim, and the folder inside it (empty: its root).
    Pvc {
        /// The claim's name.
        claim: String,
        /// Path inside the volume, without a leading `/`.
        path: String,
    },
    /// Downloaded by the storage initializer (`gs://`, `s3://`, `https://`, `hf://`, ...).
    Download(String),
}

/// Reads `uri` with the one parser of a model's location ([`ModelUri::parse`]: a URI of a known
/// scheme that its grammar refuses, such as `s3:///m`, is refused as in `skiff up`) and
/// [`resolve`]s it.
pub fn parse(uri: &str) -> Result<ModelSource, String> {
    resolve(ModelUri::parse(uri).map_err(|e| e.to_string())?)
}

/// How a revision's pod reaches the model `uri` names: a `file://` path must be absolute (a
/// directory of the node); any scheme but `file://` and `pvc://` is the storage initializer's
/// (KServe's image may read more than Skiff's fetcher).
pub fn resolve(uri: ModelUri) -> Result<ModelSource, String> {
    Ok(match uri {
        ModelUri::File(path) => {
            if !path.starts_with('/') {
                return Err(format!(
                    "file://{path}: a file:// path must be absolute in a cluster (file:///path/on/the/node)"
                ));
            }
            ModelSource::HostPath(path.trim_end_matches('/').to_owned()).normalise()
        }
        ModelUri::Pvc { claim, path } => ModelSource::Pvc { claim, path },
        ModelUri::Store(store) => ModelSource::Download(store.as_str().to_owned()),
        ModelUri::Other { uri, .. } => ModelSource::Download(uri),
    })
}

impl ModelSource {
    fn normalise(self) -> Self {
        match self {
            ModelSource::HostPath(p) if p.is_empty() => ModelSource::HostPath("/".to_owned()),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(parse("file:///models/iris/"), Ok(ModelSource::HostPath("/models/iris".into())));
        assert_eq!(
            parse("pvc://models/iris/v1"),
            Ok(ModelSource::Pvc { claim: "models".into(), path: "iris/v1".into() })
        );
        assert_eq!(parse("pvc://models"), Ok(ModelSource::Pvc { claim: "models".into(), path: String::new() }));
        assert_eq!(parse("gs://bucket/iris"), Ok(ModelSource::Download("gs://bucket/iris".into())));
        assert_eq!(parse("hf://org/model"), Ok(ModelSource::Download("hf://org/model".into())));
    }

    #[test]
    fn refusals_say_why() {
        assert!(parse("file://./models/iris").unwrap_err().contains("must be absolute"));
        assert!(parse("pvc:///x").unwrap_err().contains("claim name"));
        assert!(parse("/models/iris").unwrap_err().contains("not a URI"));
    }

    #[test]
    fn a_store_uri_the_fetcher_would_refuse_is_refused_here_too() {
        assert_eq!(parse("s3:///m").unwrap_err(), "s3:///m: no bucket");
        assert_eq!(parse("oci://ghcr.io/m:1"), Ok(ModelSource::Download("oci://ghcr.io/m:1".into())));
    }
}
