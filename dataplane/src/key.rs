//! Revision keys: a revision is named within its namespace, as Knative keys revisions by
//! `NamespacedName`, so two namespaces may each hold an `iris-predictor-00001`.

use std::fmt;

/// A revision's namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RevisionKey {
    /// Kubernetes namespace (a DNS label).
    pub namespace: String,
    /// Revision name, `<service>-predictor-NNNNN`.
    pub name: String,
}

impl RevisionKey {
    /// The key of `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> RevisionKey {
        RevisionKey { namespace: namespace.into(), name: name.into() }
    }

    /// Reads `namespace/name` (the form [`fmt::Display`] writes, and the router's header value).
    pub fn parse(text: &str) -> Option<RevisionKey> {
        let (namespace, name) = text.split_once('/')?;
        let label = |s: &str| !s.is_empty() && !s.contains('/');
        (label(namespace) && label(name)).then(|| RevisionKey::new(namespace, name))
    }
}

impl fmt::Display for RevisionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        let key = RevisionKey::new("team-a", "iris-predictor-00001");
        assert_eq!(key.to_string(), "team-a/iris-predictor-00001");
        assert_eq!(RevisionKey::parse(&key.to_string()), Some(key));
        for bad in ["", "iris", "/iris", "ns/", "a/b/c"] {
            assert_eq!(RevisionKey::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_same_name_in_two_namespaces_is_two_keys() {
        assert_ne!(RevisionKey::new("a", "iris-predictor-00001"), RevisionKey::new("b", "iris-predictor-00001"));
    }
}
