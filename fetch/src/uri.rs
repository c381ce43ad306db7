//! Which store a `storageUri` names, and the URI as it may be shown. The grammar is
//! [`skiff_api::storage`]'s (the one parser, which `skiff up` and the operator use too); this module
//! gives its refusals as the fetcher's [`Error`], and keys the cache ([`identity`]).

use std::borrow::Cow;

pub use skiff_api::storage::{Location, StoreUri, redact};

use crate::error::{Error, Result};

impl From<skiff_api::storage::UriError> for Error {
    fn from(e: skiff_api::storage::UriError) -> Error {
        Error::Uri { uri: e.uri, message: e.message }
    }
}

/// Reads a URI the fetcher downloads, as its command line and a node cache request give it
/// ([`StoreUri::parse`]); `file://` and `pvc://` are not its business.
pub fn store(uri: &str) -> Result<StoreUri> {
    Ok(StoreUri::parse(uri)?)
}

/// What the fetcher takes for a model's location: the parsed [`StoreUri`] (as `skiff up` gives it,
/// read once from its manifest), or at a process's edge (a command line, a node cache request) the
/// text of one, read here once ([`store`]).
pub trait ToStore {
    /// The parsed URI.
    fn to_store(&self) -> Result<Cow<'_, StoreUri>>;
}

impl ToStore for StoreUri {
    fn to_store(&self) -> Result<Cow<'_, StoreUri>> {
        Ok(Cow::Borrowed(self))
    }
}

impl ToStore for str {
    fn to_store(&self) -> Result<Cow<'_, StoreUri>> {
        store(self).map(Cow::Owned)
    }
}

impl ToStore for String {
    fn to_store(&self) -> Result<Cow<'_, StoreUri>> {
        self.as_str().to_store()
    }
}

/// Where a URI the fetcher downloads points ([`store`]).
pub fn parse(uri: &str) -> Result<Location> {
    Ok(store(uri)?.location().clone())
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
