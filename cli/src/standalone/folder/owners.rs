//! Which file keeps a name that two files define (`iris.yaml` and a copy, `iris-dup.yaml`): the
//! older one, and the newcomer is refused naming both files.
//!
//! While `skiff up` runs, the file that holds a name keeps it for as long as it defines it and
//! stays valid: another file that defines the same name later is refused, whatever its path or
//! timestamps. When no file holds a name yet (on start-up, or once its holder is removed or
//! refused), the file modified first takes it, and between two modified at the same instant, the
//! first path in byte order.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A valid manifest that defines a name: its `namespace/name`, its file and the file's
/// modification time (seconds and nanoseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    /// `namespace/name`.
    pub key: &'a str,
    /// The file.
    pub path: &'a Path,
    /// When the file was last modified.
    pub modified: (i64, i64),
}

/// The file that keeps each name `claims` define: `holders`' (the previous pass's owners) where it
/// still claims it, or else the one modified first, then by path.
pub fn owners(claims: &[Claim<'_>], holders: &BTreeMap<String, PathBuf>) -> BTreeMap<String, PathBuf> {
    let mut owners: BTreeMap<String, Claim<'_>> = BTreeMap::new();
    for claim in claims {
        let held = |c: &Claim<'_>| holders.get(c.key).is_some_and(|p| p == c.path);
        match owners.get(claim.key) {
            Some(owner) if held(owner) => {}
            Some(owner) if !held(claim) && (owner.modified, owner.path) <= (claim.modified, claim.path) => {}
            _ => {
                owners.insert(claim.key.to_owned(), *claim);
            }
        }
    }
    owners.into_iter().map(|(key, claim)| (key, claim.path.to_owned())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(key: &'a str, path: &'a str, modified: i64) -> Claim<'a> {
        Claim { key, path: Path::new(path), modified: (modified, 0) }
    }

    fn owner(claims: &[Claim<'_>], holders: &[(&str, &str)]) -> Vec<(String, String)> {
        let holders = holders.iter().map(|(k, p)| ((*k).to_owned(), PathBuf::from(p))).collect();
        owners(claims, &holders).into_iter().map(|(k, p)| (k, p.display().to_string())).collect()
    }

    #[test]
    fn the_holder_keeps_its_name_whatever_the_newcomers_path_or_time() {
        let claims = [claim("default/iris", "iris-dup.yaml", 1), claim("default/iris", "iris.yaml", 5)];
        assert_eq!(owner(&claims, &[("default/iris", "iris.yaml")]), [("default/iris".into(), "iris.yaml".into())]);
        let reversed = [claims[1], claims[0]];
        assert_eq!(owner(&reversed, &[("default/iris", "iris.yaml")]), [("default/iris".into(), "iris.yaml".into())]);
    }

    #[test]
    fn without_a_holder_the_file_modified_first_then_the_first_path_takes_it() {
        let claims = [claim("default/iris", "a.yaml", 7), claim("default/iris", "b.yaml", 3)];
        assert_eq!(owner(&claims, &[]), [("default/iris".into(), "b.yaml".into())]);
        let same_time = [claim("default/iris", "b.yaml", 3), claim("default/iris", "a.yaml", 3)];
        assert_eq!(owner(&same_time, &[]), [("default/iris".into(), "a.yaml".into())]);
        // A holder that no longer claims the name (removed, refused, renamed inside) holds nothing.
        assert_eq!(owner(&claims, &[("default/iris", "gone.yaml")]), [("default/iris".into(), "b.yaml".into())]);
    }

    #[test]
    fn names_in_two_namespaces_are_two_names() {
        let claims = [claim("default/iris", "a.yaml", 2), claim("team/iris", "b.yaml", 1)];
        assert_eq!(
            owner(&claims, &[]),
            [("default/iris".into(), "a.yaml".into()), ("team/iris".into(), "b.yaml".into())]
        );
    }
}
