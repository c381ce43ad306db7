//! Unpacking real archives, hostile ones included.

use std::io::Write;

use super::*;

/// A tar entry: name, kind, content, link target.
type RawEntry<'a> = (&'a str, tar::EntryType, &'a [u8], &'a str);

/// A tar whose entries are written raw, so names and links a careful builder refuses can be made.
fn tar_of(entries: &[RawEntry<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, kind, data, link) in entries {
        let mut header = tar::Header::new_gnu();
        let raw = &mut header.as_old_mut().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        if !link.is_empty() {
            header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        }
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap()
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn unpack_bytes(name: &str, bytes: &[u8], max: u64) -> (tempfile::TempDir, Result<u64>) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("model");
    fs::create_dir(&dir).unwrap();
    let archive = dir.join(name);
    fs::write(&archive, bytes).unwrap();
    let result = unpack("s3://b/m", &archive, format_of(name).unwrap(), &dir, max);
    (root, result)
}

fn refusal(name: &str, bytes: &[u8]) -> String {
    let (root, result) = unpack_bytes(name, bytes, 1 << 20);
    let outside: Vec<_> = fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(outside, ["model"], "nothing is written beside the folder");
    let left: Vec<_> = fs::read_dir(root.path().join("model")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [name], "nothing is left half-unpacked");
    result.unwrap_err().to_string()
}

#[test]
fn formats_come_from_the_name() {
    assert_eq!(format_of("m.TAR.GZ"), Some(Format::TarGz));
    assert_eq!(format_of("m.tgz"), Some(Format::TarGz));
    assert_eq!(format_of("m.tar"), Some(Format::Tar));
    assert_eq!(format_of("m.zip"), Some(Format::Zip));
    assert_eq!(format_of("model.onnx"), None);
}

#[test]
fn a_tar_gz_unpacks_with_its_layout_and_is_removed() {
    let file = tar::EntryType::Regular;
    let bytes = gz(&tar_of(&[
        ("model.onnx", file, b"weights", ""),
        ("sub/", tar::EntryType::Directory, b"", ""),
        ("sub/config.json", file, b"{}", ""),
        ("sub/alias", tar::EntryType::Symlink, b"", "config.json"),
    ]));
    let (root, result) = unpack_bytes("m.tar.gz", &bytes, 1 << 20);
    assert_eq!(result.unwrap(), 9);
    let dir = root.path().join("model");
    assert_eq!(fs::read(dir.join("model.onnx")).unwrap(), b"weights");
    assert_eq!(fs::read(dir.join("sub/alias")).unwrap(), b"{}");
    assert!(!dir.join("m.tar.gz").exists());
}

#[test]
fn a_zip_unpacks() {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("onnx/model.onnx", options).unwrap();
    zip.write_all(b"weights").unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    let (root, result) = unpack_bytes("m.zip", &bytes, 1 << 20);
    assert_eq!(result.unwrap(), 7);
    assert_eq!(fs::read(root.path().join("model/onnx/model.onnx")).unwrap(), b"weights");
}

#[test]
fn entries_that_would_write_outside_are_refused() {
    let file = tar::EntryType::Regular;
    let link = tar::EntryType::Symlink;
    let cases: [(&[RawEntry<'_>], &str); 6] = [
        (&[("../escape", file, b"x", "")], "entry \"../escape\" leads outside the folder"),
        (&[("a/../../escape", file, b"x", "")], "leads outside the folder"),
        (&[("/tmp/escape", file, b"x", "")], "leads outside the folder"),
        (&[("out", link, b"", "../..")], "link \"out\" -> \"../..\" leads outside the folder"),
        (&[("out", link, b"", "/etc")], "leads outside the folder"),
        (&[("sub", link, b"", "."), ("sub/x", file, b"x", "")], "entry \"sub/x\" lies under or writes through a link"),
    ];
    for (entries, want) in cases {
        let message = refusal("m.tar", &tar_of(entries));
        assert!(message.contains(want), "{want:?} in {message:?}");
        assert!(message.starts_with("s3://b/m: archive m.tar: "), "{message}");
    }
    let hard = refusal("m.tar", &tar_of(&[("h", tar::EntryType::Link, b"", "../../etc/passwd")]));
    assert!(hard.contains("leads outside the folder"), "{hard}");
}

#[test]
fn entries_named_from_the_current_folder_unpack_and_a_second_unpack_replaces_the_first() {
    let file = tar::EntryType::Regular;
    let dir = tar::EntryType::Directory;
    let bytes = tar_of(&[("./", dir, b"", ""), ("./onnx/", dir, b"", ""), ("./onnx/model.onnx", file, b"new", "")]);
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("onnx")).unwrap();
    fs::write(root.path().join("onnx/stale.onnx"), b"old").unwrap();
    fs::write(root.path().join("m.tar"), &bytes).unwrap();
    unpack("s3://b/m", &root.path().join("m.tar"), Format::Tar, root.path(), 1 << 20).unwrap();
    assert_eq!(fs::read(root.path().join("onnx/model.onnx")).unwrap(), b"new");
    assert!(!root.path().join("onnx/stale.onnx").exists(), "the archive's folder replaces the one there");
    let names: Vec<_> = fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["onnx"], "the archive and the staging folder are gone");
}

#[test]
fn a_hard_link_to_a_file_unpacked_before_is_made_and_to_anything_else_refused() {
    let file = tar::EntryType::Regular;
    let hard = tar::EntryType::Link;
    let (root, result) =
        unpack_bytes("m.tar", &tar_of(&[("model.onnx", file, b"weights", ""), ("copy", hard, b"", "model.onnx")]), 64);
    result.unwrap();
    assert_eq!(fs::read(root.path().join("model/copy")).unwrap(), b"weights");
    let cases: [&[RawEntry<'_>]; 3] = [
        &[("h", hard, b"", "missing")],
        &[("d/", tar::EntryType::Directory, b"", ""), ("h", hard, b"", "d")],
        &[("l", tar::EntryType::Symlink, b"", "."), ("h", hard, b"", "l")],
    ];
    for entries in cases {
        let message = refusal("m.tar", &tar_of(entries));
        assert!(message.contains("is not to a file unpacked before"), "{message}");
    }
}

#[test]
fn a_zip_link_is_refused() {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.add_symlink("out", "../..", zip::write::SimpleFileOptions::default()).unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    assert!(refusal("m.zip", &bytes).contains("entry \"out\" is a link (zip archives are unpacked without links)"));
}

#[test]
fn a_zip_entry_outside_is_refused() {
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("../escape", zip::write::SimpleFileOptions::default()).unwrap();
    zip.write_all(b"x").unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    assert!(refusal("m.zip", &bytes).contains("leads outside the folder"));
}

#[test]
fn truncated_and_corrupt_archives_say_so() {
    let whole = gz(&tar_of(&[("model.onnx", tar::EntryType::Regular, &[7u8; 4096], "")]));
    let truncated = refusal("m.tar.gz", &whole[..whole.len() / 2]);
    assert!(truncated.contains("corrupt or truncated"), "{truncated}");
    let corrupt = refusal("m.zip", b"PK\x03\x04 this is not a zip");
    assert!(corrupt.contains("corrupt or truncated"), "{corrupt}");
}

#[test]
fn what_an_archive_unpacks_is_bounded() {
    let bomb = gz(&tar_of(&[("big", tar::EntryType::Regular, &vec![0u8; 64 << 10], "")]));
    assert!(bomb.len() < 4096, "it compresses well");
    let (_root, result) = unpack_bytes("m.tar.gz", &bomb, 1 << 10);
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("the content of m.tar.gz once unpacked is")
            && message.contains("over the limit of 1024 bytes"),
        "{message}"
    );
}
