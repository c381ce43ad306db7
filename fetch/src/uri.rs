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
        if !bucket.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')) {
            return Err(refuse(
                "a bucket's name holds only letters, digits, '.', '-' and '_' (a user or password has no place in \
                 an s3:// or gs:// URI: give credentials in the environment)",
            ));
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

/// The URI without what may be a credential: its user and password, its query (a presigned
/// URL's signature) and its fragment. Total: whatever `uri` holds, parsed or not, nothing before an
/// `@` of its authority and nothing after a `?` or `#` is returned.
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
        // Not a URL a parser agrees on: everything up to the last `@` may be a user and password.
        _ => {
            let after_at = |text: &str| text.rsplit_once('@').map_or(text, |(_, after)| after).to_owned();
            match head.split_once("://") {
                Some((scheme, rest)) => format!("{scheme}://{}{suffix}", after_at(rest)),
                None => format!("{}{suffix}", after_at(head)),
            }
        }
    }
}

/// The URI as a cache tells models apart: whole, its query included (`?v=2` is not `?v=1`), less
/// the parameters that sign a presigned URL (`X-Amz-*`, `X-Goog-*`, `Signature`, `Expires`, ...),
/// which change with every signature and not with the object. It holds what [`redact`] hides:
/// keep it only as a digest.
pub fn identity(uri: &str) -> String {
    let Ok(mut url) = url::Url::parse(uri) else { return uri.to_owned() };
    if url.query().is_none() {
        return uri.to_owned();
    }
    let signing = |name: &str| {
        let name = name.to_ascii_lowercase();
        name.starts_with("x-amz-")
            || name.starts_with("x-goog-")
            || ["signature", "expires", "awsaccesskeyid", "googleaccessid"].contains(&name.as_str())
    };
    let kept: Vec<(String, String)> =
        url.query_pairs().filter(|(name, _)| !signing(name)).map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    url.query_pairs_mut().clear().extend_pairs(kept);
    url.to_string()
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
        assert!(message("s3://KEY:SECRET@models/iris").contains("a bucket's name holds only"));
    }

    #[test]
    fn credentials_in_a_url_are_never_shown() {
        let shown = redact("https://user:SECRET@h.example/m.onnx?X-Amz-Signature=SECRET");
        assert_eq!(shown, "https://h.example/m.onnx?…");
        let refusal = parse("https://user:SECRET@h.example/?sig=SECRET").unwrap_err().to_string();
        assert!(!refusal.contains("SECRET"), "{refusal}");
        assert_eq!(redact("s3://b/p"), "s3://b/p");
    }

    #[test]
    fn redaction_is_total_whatever_the_uri() {
        let cases = [
            ("https://alice:SECRET@h.example:99999/m.onnx?X-Amz-Signature=SECRET", "https://h.example:99999/m.onnx?…"),
            ("https://alice:SECRET@[::1/m.onnx?sig=SECRET", "https://[::1/m.onnx?…"),
            ("https://alice:SE/CRET@h/m.onnx", "https://h/m.onnx"),
            ("s3://KEY:SECRET@bucket/model", "s3://bucket/model"),
            ("alice:SECRET@h/m.onnx#SECRET", "h/m.onnx?…"),
            ("https://h/m.onnx#token=SECRET", "https://h/m.onnx?…"),
            ("hf://org/model:v2", "hf://org/model:v2"),
            ("gs://b/p/m.onnx", "gs://b/p/m.onnx"),
        ];
        for (uri, shown) in cases {
            assert_eq!(redact(uri), shown, "{uri}");
            let refusal = parse(uri).map_or_else(|e| e.to_string(), |_| String::new());
            assert!(!refusal.contains("SECRET") && !refusal.contains("alice"), "{refusal}");
        }
    }

    #[test]
    fn a_cache_tells_queries_apart_but_not_signatures() {
        assert_ne!(identity("https://h/m.onnx?v=1"), identity("https://h/m.onnx?v=2"));
        assert_eq!(
            identity("https://h/m.onnx?v=1&X-Amz-Signature=a&X-Amz-Date=1&Expires=5"),
            identity("https://h/m.onnx?v=1&X-Amz-Signature=b&X-Amz-Date=2&Expires=6")
        );
        assert_eq!(identity("s3://b/p"), "s3://b/p");
    }

    proptest::proptest! {
        #[test]
        fn a_user_password_and_query_are_never_shown(
            scheme in proptest::sample::select(vec!["https", "http", "s3", "gs", "hf", "x"]),
            user in "[a-z0-9:.%-]{0,8}",
            rest in "[a-z0-9:/.@\\[\\]-]{0,16}",
            query in proptest::option::of("[a-z0-9=&/@:#?]{0,12}"),
        ) {
            let query = query.map_or(String::new(), |q| format!("?X-Amz-Signature=SECRET{q}"));
            let uri = format!("{scheme}://{user}:SECRET@{rest}{query}");
            let shown = redact(&uri);
            proptest::prop_assert!(!shown.contains("SECRET"), "{} -> {}", uri, shown);
        }
    }
}
