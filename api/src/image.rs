//! A container image as a local program, for the runner without a container runtime (`skiff up`):
//! an image reference such as `ghcr.io/skiff/skiff-server:0.1`
//! names a local program through a small map file (`{"skiff-server": "/work/main/target/debug/skiff-server"}`).
//! A map value is either a path or a list (a program followed by leading arguments). Keys are matched
//! against the reference from the most to the least specific form: the whole reference, the repository
//! without tag or digest, the repository without its registry host, and its last path segment.
//! A container's argv is built as a container runtime builds it ([`resolve`]), after Kubernetes'
//! `$(VAR)` expansion of its command and args against its environment ([`expand_all`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::{Error, Result};

/// The image map: image name → program and leading arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageMap {
    entries: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawEntry {
    Path(String),
    Argv(Vec<String>),
}

impl ImageMap {
    /// Builds a map from (name, argv) pairs.
    pub fn from_entries<I, K>(entries: I) -> Self
    where
        I: IntoIterator<Item = (K, Vec<String>)>,
        K: Into<String>,
    {
        ImageMap { entries: entries.into_iter().map(|(k, v)| (k.into(), v)).collect() }
    }

    /// Parses a map file's text (JSON or YAML). Relative program paths (containing a `/` but not
    /// starting with one) are resolved against `base_dir`; bare names are looked up on the container's `PATH` when it starts.
    pub fn parse(text: &str, base_dir: &Path, origin: &Path) -> Result<Self> {
        let err = |message: String| Error::ImageMap { path: origin.to_path_buf(), message };
        let raw: BTreeMap<String, RawEntry> = if text.trim().is_empty() {
            BTreeMap::new()
        } else if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| err(e.to_string()))?
        } else {
            serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?
        };
        let mut entries = BTreeMap::new();
        for (name, entry) in raw {
            let mut argv = match entry {
                RawEntry::Path(p) => vec![p],
                RawEntry::Argv(v) => v,
            };
            let Some(program) = argv.first_mut() else {
                return Err(err(format!("entry {name:?} is an empty list")));
            };
            if program.contains('/') && !program.starts_with('/') {
                *program = base_dir.join(&*program).to_string_lossy().into_owned();
            }
            entries.insert(name, argv);
        }
        Ok(ImageMap { entries })
    }

    /// This map with `other`'s entries added; an entry of `other` replaces one of the same name.
    pub fn overridden_by(mut self, other: ImageMap) -> ImageMap {
        self.entries.extend(other.entries);
        self
    }

    /// Reads and parses a map file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::ImageMap { path: path.to_path_buf(), message: e.to_string() })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Self::parse(&text, &base, path)
    }

    /// The program and leading arguments an image maps to, if any.
    pub fn lookup(&self, image: &str) -> Option<&[String]> {
        candidates(image).into_iter().find_map(|c| self.entries.get(&c).map(Vec::as_slice))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The keys an image reference may be known by, most specific first, without duplicates.
pub fn candidates(image: &str) -> Vec<String> {
    let image = image.trim();
    let mut out: Vec<String> = Vec::with_capacity(4);
    let mut push = |s: &str| {
        if !s.is_empty() && !out.iter().any(|o| o == s) {
            out.push(s.to_string());
        }
    };
    push(image);
    let repo = strip_tag_and_digest(image);
    push(repo);
    let without_registry = strip_registry(repo);
    push(without_registry);
    if let Some(rest) = without_registry.strip_prefix("library/") {
        push(rest);
    }
    push(without_registry.rsplit('/').next().unwrap_or(without_registry));
    out
}

/// `repo[:tag][@digest]` → `repo` (a `:` inside the registry host's port is kept).
fn strip_tag_and_digest(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last_slash = no_digest.rfind('/').map(|i| i + 1).unwrap_or(0);
    match no_digest[last_slash..].find(':') {
        Some(colon) => &no_digest[..last_slash + colon],
        None => no_digest,
    }
}

/// Drops a leading registry host (a first segment with a `.` or `:`, or `localhost`).
fn strip_registry(repo: &str) -> &str {
    match repo.split_once('/') {
        Some((first, rest)) if first.contains('.') || first.contains(':') || first == "localhost" => rest,
        _ => repo,
    }
}

/// What to execute for a container: the argv, or why it cannot be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The program and its arguments.
    Argv(Vec<String>),
    /// The image is not in the map (reported like a failed pull).
    UnknownImage(String),
}

/// Builds a container's argv like a container runtime does: `command` replaces the image's
/// entrypoint (here: the mapped program), and `args` are appended to whichever is used.
/// With a `command`, an unmapped image is fine (the command names the program).
pub fn resolve(map: &ImageMap, image: &str, command: &[String], args: &[String]) -> Resolved {
    let mut argv: Vec<String> = if !command.is_empty() {
        command.to_vec()
    } else {
        match map.lookup(image) {
            Some(entry) => entry.to_vec(),
            None => {
                return Resolved::UnknownImage(format!(
                    "image {image:?} is not in the image map (tried {:?}) and the container has no command",
                    candidates(image)
                ));
            }
        }
    };
    argv.extend(args.iter().cloned());
    Resolved::Argv(argv)
}

/// The `imageID` reported for an image: `skiff-local://<program>` when mapped.
pub fn image_id(map: &ImageMap, image: &str) -> String {
    match map.lookup(image) {
        Some(entry) => format!("skiff-local://{}", entry[0]),
        None => format!("skiff-local://{}", strip_tag_and_digest(image)),
    }
}

/// Kubernetes `$(VAR)` expansion: `$(NAME)` becomes the value when `NAME` is known and stays as
/// written otherwise; `$$` is an escaped `$`.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match lookup(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Expands `$(VAR)` in a container's command or args against its final environment.
pub fn expand_all(items: &[String], env: &[(String, String)]) -> Vec<String> {
    items.iter().map(|s| expand(s, |name| lookup(env, name))).collect()
}

fn lookup<'a>(vars: &'a [(String, String)], name: &str) -> Option<&'a str> {
    vars.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn expansion_rules() {
        let vars = [("A".to_string(), "1".to_string())];
        let l = |n: &str| lookup(&vars, n);
        assert_eq!(expand("x$(A)y", l), "x1y");
        assert_eq!(expand("$(B)", l), "$(B)");
        assert_eq!(expand("$$(A)", l), "$(A)");
        assert_eq!(expand("cost $5 $(", l), "cost $5 $(");
        assert_eq!(expand("", l), "");
        assert_eq!(expand_all(&["--port=$(A)".to_string()], &vars), ["--port=1"]);
    }

    #[test]
    fn candidates_go_from_specific_to_general() {
        assert_eq!(
            candidates("ghcr.io/skiff-serving/skiff-server:0.1"),
            v(&[
                "ghcr.io/skiff-serving/skiff-server:0.1",
                "ghcr.io/skiff-serving/skiff-server",
                "skiff-serving/skiff-server",
                "skiff-server"
            ])
        );
        assert_eq!(candidates("python-http"), v(&["python-http"]));
        assert_eq!(candidates("python-http:latest"), v(&["python-http:latest", "python-http"]));
        assert_eq!(
            candidates("localhost:5000/a/b@sha256:abc"),
            v(&["localhost:5000/a/b@sha256:abc", "localhost:5000/a/b", "a/b", "b"])
        );
        assert_eq!(
            candidates("docker.io/library/python:3"),
            v(&["docker.io/library/python:3", "docker.io/library/python", "library/python", "python"])
        );
    }

    #[test]
    fn parse_json_and_yaml_and_lists() {
        let base = Path::new("/maps");
        let m =
            ImageMap::parse(r#"{"skiff-server": "bin/skiff-server", "py": ["python3", "-u"]}"#, base, base).unwrap();
        assert_eq!(m.lookup("reg.io/x/skiff-server:1"), Some(&v(&["/maps/bin/skiff-server"])[..]));
        assert_eq!(m.lookup("py"), Some(&v(&["python3", "-u"])[..]));
        let y = ImageMap::parse("python-http: /usr/bin/python3\nother:\n  - /bin/sh\n  - -c\n", base, base).unwrap();
        assert_eq!(y.lookup("python-http:3.12"), Some(&v(&["/usr/bin/python3"])[..]));
        assert_eq!(y.len(), 2);
        assert!(ImageMap::parse(r#"{"x": []}"#, base, base).is_err());
        assert!(ImageMap::parse("", base, base).unwrap().is_empty());
    }

    #[test]
    fn a_map_overrides_another_by_name() {
        let built_in = ImageMap::from_entries([("a", v(&["one"])), ("b", v(&["two"]))]);
        let merged = built_in.overridden_by(ImageMap::from_entries([("b", v(&["mine"])), ("c", v(&["three"]))]));
        assert_eq!(merged.lookup("a"), Some(&v(&["one"])[..]));
        assert_eq!(merged.lookup("b"), Some(&v(&["mine"])[..]));
        assert_eq!(merged.len(), 3);
    }

    #[test]
    fn resolve_follows_entrypoint_rules() {
        let m = ImageMap::from_entries([("python-http", v(&["/usr/bin/python3"]))]);
        assert_eq!(
            resolve(&m, "python-http", &[], &v(&["-m", "http.server", "8080"])),
            Resolved::Argv(v(&["/usr/bin/python3", "-m", "http.server", "8080"]))
        );
        assert_eq!(resolve(&m, "unmapped", &v(&["sleep"]), &v(&["5"])), Resolved::Argv(v(&["sleep", "5"])));
        match resolve(&m, "nginx:1.27", &[], &[]) {
            Resolved::UnknownImage(msg) => assert!(msg.contains("nginx:1.27"), "{msg}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(image_id(&m, "python-http:1"), "skiff-local:///usr/bin/python3");
    }
}
