//! Where a model comes from (`storageUri`) and how the pod gets it: `file://` as a hostPath volume,
//! `pvc://<claim>/<path>` as the claim's volume, anything else through KServe's storage initializer
//! into an emptyDir.

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

/// Reads a `storageUri`; the error says what is wrong with it.
pub fn parse(uri: &str) -> Result<ModelSource, String> {
    if let Some(path) = uri.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(format!("{uri}: a file:// path must be absolute in a cluster (file:///path/on/the/node)"));
        }
        return Ok(ModelSource::HostPath(path.trim_end_matches('/').to_owned()).normalise());
    }
    if let Some(rest) = uri.strip_prefix("pvc://") {
        let (claim, path) = rest.split_once('/').unwrap_or((rest, ""));
        if claim.is_empty() {
            return Err(format!("{uri}: pvc:// needs a claim name (pvc://<claim>/<path>)"));
        }
        return Ok(ModelSource::Pvc { claim: claim.to_owned(), path: path.trim_matches('/').to_owned() });
    }
    match uri.split_once("://") {
        Some((scheme, rest)) if !scheme.is_empty() && !rest.is_empty() => Ok(ModelSource::Download(uri.to_owned())),
        _ => Err(format!("{uri}: not a URI (file://, pvc://, gs://, s3://, https://, hf://, ...)")),
    }
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
}
