//! Generated tar archives of link chains (symbolic and hard links, relative and absolute, `..`,
//! folders, files written through links, the same name twice) unpacked for real: whether the
//! archive is taken or refused, nothing outside the model's folder is ever created, changed,
//! linked to or readable through what was unpacked (a sentinel tree beside the folder is checked
//! byte for byte, with its files' link counts), and a refused archive leaves nothing unpacked.

#[path = "common/archives.rs"]
mod archives;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use archives::{RawEntry, raw_tar};
use proptest::prelude::*;
use skiff_fetch::archive::{Format, unpack};

/// What an archive entry is.
#[derive(Debug, Clone)]
enum Kind {
    Dir,
    File,
    Symlink(String),
    HardLink(String),
}

/// Stands for the absolute path of the folder holding the sentinel tree.
const ROOT: &str = "@";

/// A name in the archive: short, so that generated links often meet.
fn name() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("l"), Just("m"), Just("n"), Just("f")]
}

fn part() -> impl Strategy<Value = &'static str> {
    prop_oneof![4 => name(), 2 => Just("a"), 3 => Just(".."), 1 => Just("."), 1 => Just("secret")]
}

/// An entry's name: mostly one part in the folder `a` or `b` (where `..` stays inside), a
/// few of any parts.
fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (prop_oneof![Just("a"), Just("b")], name()).prop_map(|(dir, name)| format!("{dir}/{name}")),
        2 => name().prop_map(str::to_owned),
        1 => prop::collection::vec(part(), 1..4).prop_map(|parts| parts.join("/")),
    ]
}

/// Where a link points: often one step up from another link (the steps of a chain), or a
/// name under one; sometimes anywhere, absolute included.
fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("..".to_owned()),
        4 => name().prop_map(|name| format!("{name}/..")),
        3 => (path(), prop_oneof![Just("created"), Just("secret"), Just("keep/secret"), Just("..")])
            .prop_map(|(path, end)| format!("{path}/{end}")),
        2 => prop::collection::vec(part(), 1..4).prop_map(|parts| parts.join("/")),
        1 => Just("/".to_owned()),
        1 => Just(format!("{ROOT}/secret")),
        1 => Just(format!("{ROOT}/keep")),
    ]
}

fn entry() -> impl Strategy<Value = (String, Kind)> {
    let kind = prop_oneof![
        1 => Just(Kind::Dir),
        3 => Just(Kind::File),
        5 => target().prop_map(Kind::Symlink),
        2 => target().prop_map(Kind::HardLink),
    ];
    (path(), kind)
}

/// An archive: the folders `a` and `b`, then generated entries.
fn archive() -> impl Strategy<Value = Vec<(String, Kind)>> {
    prop::collection::vec(entry(), 1..12).prop_map(|entries| {
        let folders = [("a".to_owned(), Kind::Dir), ("b".to_owned(), Kind::Dir)];
        folders.into_iter().chain(entries).collect()
    })
}

/// A tar of `entries`, `@` in a link replaced by `root`.
fn tar_of(entries: &[(String, Kind)], root: &str) -> Vec<u8> {
    let raw: Vec<(&str, tar::EntryType, &[u8], String)> = entries
        .iter()
        .map(|(name, kind)| match kind {
            Kind::Dir => (name.as_str(), tar::EntryType::Directory, &b""[..], String::new()),
            Kind::File => (name.as_str(), tar::EntryType::Regular, &b"written by the archive"[..], String::new()),
            Kind::Symlink(to) => (name.as_str(), tar::EntryType::Symlink, &b""[..], to.replace(ROOT, root)),
            Kind::HardLink(to) => (name.as_str(), tar::EntryType::Link, &b""[..], to.replace(ROOT, root)),
        })
        .collect();
    let raw: Vec<RawEntry<'_>> = raw.iter().map(|(name, kind, data, to)| (*name, *kind, *data, to.as_str())).collect();
    raw_tar(&raw)
}

/// Everything under `dir` but `skip`: each path's kind, content or link target, link count
/// and permissions.
fn snapshot(dir: &Path, skip: &Path, into: &mut BTreeMap<String, String>) {
    for item in fs::read_dir(dir).unwrap() {
        let path = item.unwrap().path();
        if path == skip {
            continue;
        }
        let meta = fs::symlink_metadata(&path).unwrap();
        let what = if meta.is_symlink() {
            format!("link to {:?}", fs::read_link(&path).unwrap())
        } else if meta.is_dir() {
            snapshot(&path, skip, into);
            format!("folder {:o}", meta.mode())
        } else {
            format!("file {:o} x{} {:?}", meta.mode(), meta.nlink(), fs::read(&path).unwrap())
        };
        into.insert(path.display().to_string(), what);
    }
}

/// Every path under `dir`, links not followed.
fn walk(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    for item in fs::read_dir(dir).unwrap() {
        let path = item.unwrap().path();
        if fs::symlink_metadata(&path).unwrap().is_dir() {
            walk(&path, into);
        }
        into.push(path);
    }
}

fn sentinel_tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    fs::write(root.path().join("secret"), "SENTINEL").unwrap();
    fs::create_dir(root.path().join("keep")).unwrap();
    fs::write(root.path().join("keep/secret"), "SENTINEL").unwrap();
    let model = root.path().join("a/l/model");
    fs::create_dir_all(&model).unwrap();
    (root, model)
}

fn check(entries: &[(String, Kind)]) -> Result<(), TestCaseError> {
    let (root, model) = sentinel_tree();
    let mut before = BTreeMap::new();
    snapshot(root.path(), &model, &mut before);
    let archive = model.join("m.tar");
    fs::write(&archive, tar_of(entries, &root.path().display().to_string())).unwrap();
    let result = unpack("s3://b/m", &archive, Format::Tar, &model, 1 << 20);

    let mut after = BTreeMap::new();
    snapshot(root.path(), &model, &mut after);
    prop_assert_eq!(&before, &after, "nothing outside the folder changes ({:?})", result);
    let inside = fs::canonicalize(&model).unwrap();
    let mut unpacked = Vec::new();
    walk(&model, &mut unpacked);
    for path in &unpacked {
        if let Ok(real) = fs::canonicalize(path) {
            prop_assert!(real.starts_with(&inside), "{} leads to {}", path.display(), real.display());
        }
        let meta = fs::symlink_metadata(path).unwrap();
        if meta.is_file() {
            prop_assert!(!fs::read_to_string(path).unwrap_or_default().contains("SENTINEL"), "{}", path.display());
        }
    }
    if result.is_err() {
        prop_assert_eq!(unpacked, vec![archive], "a refused archive leaves nothing unpacked");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_chain_of_links_writes_or_reads_outside_the_folder(
        entries in archive(),
    ) {
        check(&entries)?;
    }
}

/// The chains the adversarial run used, each link alone staying inside (`a/z` ends at the
/// sentinel tree's root): a file created through them, a file outside linked to and overwritten
/// through a hard link, a folder made under them.
#[test]
fn the_chains_that_escaped_before_are_refused() {
    let symlink = |name: &str, to: &str| (name.to_owned(), Kind::Symlink(to.to_owned()));
    let chain = [
        ("a".to_owned(), Kind::Dir),
        symlink("a/up", ".."),
        symlink("a/x", "up/.."),
        symlink("a/y", "x/.."),
        symlink("a/z", "y/.."),
    ];
    let file = |name: &str| (name.to_owned(), Kind::File);
    let ends: [&[(String, Kind)]; 4] = [
        &[symlink("f", "a/z/created"), file("f")],
        &[("h".to_owned(), Kind::HardLink("a/z/secret".into())), file("h")],
        &[("a/z/made".to_owned(), Kind::Dir)],
        &[symlink("peek", "a/z/keep/secret")],
    ];
    for end in ends {
        let entries = [&chain[..], end].concat();
        check(&entries).unwrap_or_else(|e| panic!("{entries:?}: {e}"));
    }
}
