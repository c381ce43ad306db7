//! Hostile archives for the tests: tar entries written raw (names, links and chains of links
//! that a careful builder refuses), and bombs that unpack to far more than they weigh.

#![allow(dead_code)]

use std::io::{Read, Write};

/// A tar entry: name, kind, content, link target.
pub type RawEntry<'a> = (&'a str, tar::EntryType, &'a [u8], &'a str);

/// A tar whose entries are written raw, as given.
pub fn raw_tar(entries: &[RawEntry<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, kind, data, link) in entries {
        let mut header = tar::Header::new_gnu();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
        header.set_entry_type(*kind);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append(&header, *data).unwrap();
    }
    builder.into_inner().unwrap()
}

/// `bytes` gzipped.
pub fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A `.tar.gz` holding one file `name` of `size` zero bytes, written as it is compressed (never
/// whole in memory).
pub fn bomb(name: &str, size: u64) -> Vec<u8> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut builder = tar::Builder::new(encoder);
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o644);
    builder.append_data(&mut header, name, std::io::repeat(0).take(size)).unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

/// The links of a chain, each alone staying inside the folder it is unpacked in: `a/up`
/// points at that folder, and `a/l1` … `a/l{levels}` each one folder higher than the one
/// before, so `a/l{levels}` is `levels` folders above it.
pub fn ladder(levels: usize) -> Vec<(String, String)> {
    let mut links = vec![("a/l0".to_owned(), "..".to_owned())];
    for level in 1..=levels {
        links.push((format!("a/l{level}"), format!("l{}/..", level - 1)));
    }
    links
}

/// A tar of the folder `a`, `ladder(levels)`'s links and `rest`.
pub fn ladder_tar(levels: usize, rest: &[RawEntry<'_>]) -> Vec<u8> {
    let links = ladder(levels);
    let mut entries: Vec<RawEntry<'_>> = vec![("a/", tar::EntryType::Directory, b"", "")];
    entries.extend(links.iter().map(|(name, to)| (name.as_str(), tar::EntryType::Symlink, &b""[..], to.as_str())));
    entries.extend_from_slice(rest);
    raw_tar(&entries)
}
