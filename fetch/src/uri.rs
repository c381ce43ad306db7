//! Which store a `storageUri` names, and the URI as it may be shown: [`redact`] drops a URL's
//! user, password and query (a presigned URL's signature) so no credential reaches a log or a
//! status.

use crate::error::{Error, Result};

/// A model's location in a store.
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

/// Reads a `storageUri` the fetcher downloads; `file://` and `pvc://` are not its business.
pub fn parse(uri: &str) -> Result<Location> {
    let refuse = |message: &str| Error::Uri { uri: redact(uri), message: message.to_owned() };
    let (scheme, rest) = uri.split_once("://").ok_or_else(|| refuse("not a URI (s3://, gs://, https://, hf://)"))?;
    let bucket_and_prefix = || {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(refuse("no bucket"));
        }
        Ok((bucket.to_owned(), prefix.trim_matches('/').to_owned()))
    };
    match scheme {
        "s3" => bucket_and_prefix().map(|(bucket, prefix)| Location::S3 { bucket, prefix }),
        "gs" => bucket_and_prefix().map(|(bucket, prefix)| Location::Gcs { bucket, prefix }),
        "http" | "https" => {
            let url = url::Url::parse(uri).map_err(|e| refuse(&format!("not a URL: {e}")))?;
            if url.path_segments().and_then(|mut s| s.next_back()).is_none_or(str::is_empty) {
                return Err(refuse("names no file (an http(s) storageUri is one file or archive)"));
            }
            Ok(Location::Http { url: uri.to_owned() })
        }
        "hf" => {
            let (repo, revision) = rest.split_once(':').unwrap_or((rest, "main"));
            let repo = repo.trim_matches('/');
            let parts: Vec<&str> = repo.split('/').collect();
            if parts.len() != 2 || parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
                return Err(refuse("an hf:// URI is hf://<org>/<repo>[:<revision>]"));
            }
            if revision.is_empty() || revision.contains('/') && revision.split('/').any(|p| p == "..") {
                return Err(refuse("the revision after ':' is empty or leads outside the repository"));
            }
            Ok(Location::Hf { repo: repo.to_owned(), revision: revision.to_owned() })
        }
        other => Err(refuse(&format!("the scheme {other}:// is not fetched (s3://, gs://, https://, hf://)"))),
    }
}

/// The URI without what may be a credential: a URL's user, password and query.
pub fn redact(uri: &str) -> String {
    match url::Url::parse(uri) {
        Ok(mut url) if matches!(url.scheme(), "http" | "https") => {
            let had_query = url.query().is_some();
            url.set_query(None);
            url.set_fragment(None);
            // Both fail only for URLs that cannot hold a user, which then has none to drop.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            let mut shown = url.to_string();
            if had_query {
                shown.push_str("?…");
            }
            shown
        }
        _ => uri.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes() {
        assert_eq!(
            parse("s3://models/iris/v1/").unwrap(),
            Location::S3 { bucket: "models".into(), prefix: "iris/v1".into() }
        );
        assert_eq!(parse("gs://b").unwrap(), Location::Gcs { bucket: "b".into(), prefix: String::new() });
        assert_eq!(
            parse("hf://org/model").unwrap(),
            Location::Hf { repo: "org/model".into(), revision: "main".into() }
        );
        assert_eq!(
            parse("hf://org/model:v2").unwrap(),
            Location::Hf { repo: "org/model".into(), revision: "v2".into() }
        );
        assert!(matches!(parse("https://h/m.tar.gz").unwrap(), Location::Http { .. }));
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let message = |uri: &str| parse(uri).unwrap_err().to_string();
        assert!(message("s3:///x").contains("no bucket"));
        assert!(message("hf://org").contains("hf://<org>/<repo>"));
        assert!(message("hf://org/../x").contains("hf://<org>/<repo>"));
        assert!(message("ftp://h/x").contains("ftp:// is not fetched"));
        assert!(message("https://h/").contains("names no file"));
        assert!(message("models/iris").contains("not a URI"));
    }

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        let shown = redact("https://user:SECRET@h.example/m.onnx?X-Amz-Signature=SECRET");
        assert_eq!(shown, "https://h.example/m.onnx?…");
        let refusal = parse("https://user:SECRET@h.example/?sig=SECRET").unwrap_err().to_string();
        assert!(!refusal.contains("SECRET"), "{refusal}");
        assert_eq!(redact("s3://b/p"), "s3://b/p");
    }
}
