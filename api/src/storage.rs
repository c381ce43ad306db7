//! Where a model comes from: a `storageUri`, parsed once by [`ModelUri::parse`] with the fetcher's
//! grammar. `skiff up`, the operator and the fetcher all take the parsed type:
//!
//! - `file://path`: a folder ([`ModelUri::File`]; relative to the manifest in `skiff up`, a node's
//!   directory on a cluster, where it must be absolute);
//! - `pvc://claim/path`: a PersistentVolumeClaim of the namespace ([`ModelUri::Pvc`]; on a cluster);
//! - `s3://bucket/prefix`, `gs://bucket/prefix`, `http(s)://host/file` and `hf://org/repo[:revision]`:
//!   a store the fetcher reads ([`StoreUri`]);
//! - any other `scheme://...` ([`ModelUri::Other`]): left to a cluster's storage initializer (KServe's
//!   image may read it); `skiff up` refuses it.
//!
//! A URI of a known scheme that its grammar refuses (`s3:///m`: no bucket) is refused in both modes
//! by validation, naming `spec.predictor.model.storageUri`. [`redact`] gives the URI as it may be
//! shown: without a URL's user, password and query (a presigned URL's signature), so that no
//! credential reaches a log or a status.

use std::fmt;

/// A model's location in a store the fetcher reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `s3://bucket/prefix`.
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix (a folder) or one object's key; empty for the whole bucket.
        prefix: String,
    },
    /// `gs://bucket/prefix`.
    Gcs {
        /// The bucket.
        bucket: String,
        /// The object prefix or one object's name.
        prefix: String,
    },
    /// `http://` or `https://`: one file (an archive is unpacked).
    Http {
        /// The URL, as given.
        url: String,
    },
    /// `hf://org/repo[:revision]`.
    Hf {
        /// `org/repo`.
        repo: String,
        /// A branch, tag or commit; `main` when not given.
        revision: String,
    },
}

/// A `storageUri` the fetcher reads: the URI as given (the model cache keys on it) and its location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUri {
    uri: String,
    location: Location,
}

/// Where a model comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelUri {
    /// `file://path`: the path as written (relative or absolute).
    File(String),
    /// `pvc://claim/path`.
    Pvc {
        /// The PersistentVolumeClaim's name.
        claim: String,
        /// The path inside it, without leading or trailing `/` (empty: the whole volume).
        path: String,
    },
    /// A store the fetcher reads.
    Store(StoreUri),
    /// Another scheme, which only a cluster's storage initializer may read.
    Other {
        /// The URI as given.
        uri: String,
        /// Its scheme, before `://`.
        scheme: String,
    },
}

/// Why a `storageUri` cannot be read: shown as `<uri>: <message>`, the URI [`redact`]ed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriError {
    /// The URI, redacted.
    pub uri: String,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.uri, self.message)
    }
}

impl std::error::Error for UriError {}

/// The schemes the fetcher reads, as refusals list them.
const STORES: &str = "s3://, gs://, https://, hf://";

fn refusal(uri: &str, message: impl Into<String>) -> UriError {
    UriError { uri: redact(uri), message: message.into() }
}

impl ModelUri {
    /// Reads a `storageUri`: the one parser of the form of a model's location.
    pub fn parse(uri: &str) -> Result<ModelUri, UriError> {
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Err(refusal(uri, format!("not a URI (file://, pvc://, {STORES})")));
        };
        match scheme {
            "file" => Ok(ModelUri::File(rest.to_owned())),
            "pvc" => {
                let (claim, path) = rest.split_once('/').unwrap_or((rest, ""));
                if claim.is_empty() {
                    return Err(refusal(uri, "pvc:// needs a claim name (pvc://<claim>/<path>)"));
                }
                Ok(ModelUri::Pvc { claim: claim.to_owned(), path: path.trim_matches('/').to_owned() })
            }
            "s3" | "gs" | "http" | "https" | "hf" => StoreUri::read(uri, scheme, rest).map(ModelUri::Store),
            _ if scheme.is_empty() || rest.is_empty() => {
                Err(refusal(uri, format!("not a URI (file://, pvc://, {STORES})")))
            }
            _ => Ok(ModelUri::Other { uri: uri.to_owned(), scheme: scheme.to_owned() }),
        }
    }
}

/// The refusal of a scheme the fetcher does not read.
pub fn not_fetched(uri: &str, scheme: &str) -> UriError {
    refusal(uri, format!("the scheme {scheme}:// is not fetched ({STORES})"))
}

impl StoreUri {
    /// Reads a URI the fetcher downloads (its command line, a node cache request); any other
    /// scheme, `file://` and `pvc://` included, is refused. [`ModelUri::parse`] reads a manifest's.
    pub fn parse(uri: &str) -> Result<StoreUri, UriError> {
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Err(refusal(uri, format!("not a URI ({STORES})")));
        };
        StoreUri::read(uri, scheme, rest)
    }

    fn read(uri: &str, scheme: &str, rest: &str) -> Result<StoreUri, UriError> {
        let bucket_and_prefix = || {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(refusal(uri, "no bucket"));
            }
            if !bucket.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')) {
                return Err(refusal(
                    uri,
                    "a bucket's name holds only letters, digits, '.', '-' and '_' (a user or password has no place \
                     in an s3:// or gs:// URI: give credentials in the environment)",
                ));
            }
            Ok((bucket.to_owned(), prefix.trim_matches('/').to_owned()))
        };
        let location = match scheme {
            "s3" => bucket_and_prefix().map(|(bucket, prefix)| Location::S3 { bucket, prefix })?,
            "gs" => bucket_and_prefix().map(|(bucket, prefix)| Location::Gcs { bucket, prefix })?,
            "http" | "https" => {
                let url = url::Url::parse(uri).map_err(|e| refusal(uri, format!("not a URL: {e}")))?;
                if url.path_segments().and_then(|mut s| s.next_back()).is_none_or(str::is_empty) {
                    return Err(refusal(uri, "names no file (an http(s) storageUri is one file or archive)"));
                }
                Location::Http { url: uri.to_owned() }
            }
            "hf" => {
                let (repo, revision) = rest.split_once(':').unwrap_or((rest, "main"));
                let repo = repo.trim_matches('/');
                let parts: Vec<&str> = repo.split('/').collect();
                if parts.len() != 2 || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
                    return Err(refusal(uri, "an hf:// URI is hf://<org>/<repo>[:<revision>]"));
                }
                if revision.is_empty() || revision.contains('/') && revision.split('/').any(|p| p == "..") {
                    return Err(refusal(uri, "the revision after ':' is empty or leads outside the repository"));
                }
                Location::Hf { repo: repo.to_owned(), revision: revision.to_owned() }
            }
            other => return Err(not_fetched(uri, other)),
        };
        Ok(StoreUri { uri: uri.to_owned(), location })
    }

    /// The URI as given (it may hold credentials: show [`redact`] of it).
    pub fn as_str(&self) -> &str {
        &self.uri
    }

    /// Where it points.
    pub fn location(&self) -> &Location {
        &self.location
    }
}

impl fmt::Display for StoreUri {
    /// The URI as it may be shown ([`redact`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.uri))
    }
}

/// `uri` without a URL's user, password, query and fragment (`?…` marks that a query was cut), so
/// that a presigned URL's signature or a credential in the URI reaches no log or status.
pub fn redact(uri: &str) -> String {
    let cut = uri.find(['?', '#']);
    let suffix = if cut.is_some() { "?…" } else { "" };
    let head = &uri[..cut.unwrap_or(uri.len())];
    match url::Url::parse(head) {
        Ok(url) if url.has_host() && url.username().is_empty() && url.password().is_none() => {
            format!("{head}{suffix}")
        }
        Ok(mut url) if url.has_host() => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            format!("{url}{suffix}")
        }
        _ => {
            let after_at = |text: &str| text.rsplit_once('@').map_or(text, |(_, after)| after).to_owned();
            match head.split_once("://") {
                Some((scheme, rest)) => format!("{scheme}://{}{suffix}", after_at(rest)),
                None => format!("{}{suffix}", after_at(head)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_model_location() {
        assert_eq!(ModelUri::parse("file://./models/iris"), Ok(ModelUri::File("./models/iris".into())));
        assert_eq!(ModelUri::parse("file:///m/"), Ok(ModelUri::File("/m/".into())));
        assert_eq!(ModelUri::parse("pvc://c/a/b/"), Ok(ModelUri::Pvc { claim: "c".into(), path: "a/b".into() }));
        let Ok(ModelUri::Store(store)) = ModelUri::parse("s3://models/iris/v1/") else { panic!("a store") };
        assert_eq!(store.location(), &Location::S3 { bucket: "models".into(), prefix: "iris/v1".into() });
        assert_eq!(store.as_str(), "s3://models/iris/v1/");
        assert_eq!(
            ModelUri::parse("oci://ghcr.io/m:1"),
            Ok(ModelUri::Other { uri: "oci://ghcr.io/m:1".into(), scheme: "oci".into() })
        );
    }

    #[test]
    fn a_known_scheme_out_of_its_grammar_is_refused() {
        let refused = |uri: &str| ModelUri::parse(uri).unwrap_err().to_string();
        assert_eq!(refused("s3:///m"), "s3:///m: no bucket");
        assert_eq!(refused("gs:///m"), "gs:///m: no bucket");
        assert!(refused("hf://org").contains("hf://<org>/<repo>"));
        assert!(refused("pvc:///x").contains("claim name"));
        assert!(refused("models/iris").contains("not a URI"));
        assert!(refused("").contains("not a URI"));
    }

    #[test]
    fn the_fetcher_reads_stores_only() {
        assert!(StoreUri::parse("gs://b/m").is_ok());
        assert!(StoreUri::parse("file:///m").unwrap_err().to_string().contains("file:// is not fetched"));
        assert!(StoreUri::parse("ftp://h/x").unwrap_err().to_string().contains("ftp:// is not fetched"));
        assert_eq!(StoreUri::parse("https://u:SECRET@h/m.onnx").unwrap().to_string(), "https://h/m.onnx");
    }
}
