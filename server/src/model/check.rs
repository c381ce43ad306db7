//! The model file's sanity check, done before ONNX Runtime sees it (and by `skiff up` before it
//! spawns a replica), so that an empty, truncated, text or unreadable `model.onnx` is refused at
//! once with a reason instead of crashing a replica.
//!
//! An ONNX model is a protobuf `ModelProto`. The check, exactly:
//! 1. the path opens and reads as a regular file (a dangling symlink, a symlink to a folder or an
//!    unreadable file is refused with the system's error);
//! 2. its size is between 1 byte and [`MAX_MODEL_BYTES`] (2 GiB, protobuf's limit: bigger models
//!    keep their weights in external data files);
//! 3. its first [`HEAD_BYTES`] parse as top-level `ModelProto` fields: each field's tag names a
//!    field `ModelProto` has (`ir_version` = 1, `producer_name` = 2, `producer_version` = 3,
//!    `domain` = 4, `model_version` = 5, `doc_string` = 6, `graph` = 7, `opset_import` = 8,
//!    `metadata_props` = 14, `training_info` = 20, `functions` = 25, `configuration` = 26) with that
//!    field's wire type (varint for 1 and 5, length-delimited for the others), varints end within
//!    10 bytes, and each length-delimited field ends within the file. A writer puts
//!    `ir_version` first (`0x08`), so a real model starts `08 xx`.
//!
//! It is a header check, not a parse: a well-formed `ModelProto` that ONNX Runtime still refuses
//! (an unknown operator) fails when the model loads, and that error reaches the replica's status
//! through the termination message (see [`crate::termination`]).

use std::io::Read;
use std::path::Path;

/// The largest model file accepted (protobuf's 2 GiB limit on one message).
pub const MAX_MODEL_BYTES: u64 = 2 << 30;

/// How much of the file's start is parsed.
pub const HEAD_BYTES: usize = 64 * 1024;

/// Checks the model file at `path` (following symlinks); the error says what is wrong with it
/// (without the path, which the caller names).
pub fn check_file(path: &Path) -> Result<(), String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("cannot open it: {e}"))?;
    let metadata = file.metadata().map_err(|e| format!("cannot read its metadata: {e}"))?;
    if !metadata.is_file() {
        return Err("it is not a regular file".into());
    }
    let mut head = Vec::with_capacity(HEAD_BYTES.min(usize::try_from(metadata.len()).unwrap_or(HEAD_BYTES)));
    file.by_ref().take(HEAD_BYTES as u64).read_to_end(&mut head).map_err(|e| format!("cannot read it: {e}"))?;
    check_header(metadata.len(), &head).map_err(|e| format!("not an ONNX model: {e}"))
}

/// Checks a model file of `len` bytes whose first bytes are `head` (at most [`HEAD_BYTES`]).
pub fn check_header(len: u64, head: &[u8]) -> Result<(), String> {
    if len == 0 {
        return Err("the file is empty".into());
    }
    if len > MAX_MODEL_BYTES {
        return Err(format!("{len} bytes is more than the {MAX_MODEL_BYTES} bytes a protobuf message may have"));
    }
    let mut at = 0usize;
    while at < head.len() {
        let (tag, after_tag) = varint(head, at).ok_or_else(|| format!("byte {at}: the field tag does not end"))?;
        let (field, wire) = (tag >> 3, tag & 7);
        let expected = match field {
            1 | 5 => 0,
            2..=4 | 6..=8 | 14 | 20 | 25 | 26 => 2,
            _ => {
                return Err(format!(
                    "byte {at}: 0x{:02x} is not a ModelProto field (a model starts with 0x08, ir_version)",
                    head[at]
                ));
            }
        };
        if wire != expected {
            return Err(format!(
                "byte {at}: 0x{:02x} is ModelProto's field {field} with wire type {wire}, not {expected}",
                head[at]
            ));
        }
        let (value, after_value) =
            varint(head, after_tag).ok_or_else(|| format!("byte {after_tag}: field {field}'s value does not end"))?;
        if wire == 0 {
            at = after_value;
            continue;
        }
        let end = (after_value as u64).saturating_add(value);
        if end > len {
            return Err(format!("field {field} needs {end} bytes but the file has {len}: it is truncated"));
        }
        match usize::try_from(end) {
            Ok(end) if end <= head.len() => at = end,
            _ => break,
        }
    }
    Ok(())
}

/// The varint at `at`, and where it ends; `None` when it runs past `bytes` or 10 bytes.
fn varint(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, byte) in bytes.get(at..)?.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, at + i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ir_version: 8`, a graph with one node of an operator nobody has, `opset_import {version: 17}`.
    const UNKNOWN_OPERATOR: &[u8] = b"\x08\x08\x3a\x0f\x0a\x0a\x22\x08NoSuchOp\x12\x01g\x42\x02\x10\x11";

    fn check(bytes: &[u8]) -> Result<(), String> {
        check_header(bytes.len() as u64, bytes)
    }

    #[test]
    fn a_well_formed_model_proto_passes() {
        assert_eq!(check(UNKNOWN_OPERATOR), Ok(()));
        let iris = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/models/iris/model.onnx")).unwrap();
        assert_eq!(check(&iris), Ok(()));
    }

    #[test]
    fn empty_text_and_truncated_files_are_refused_with_why() {
        assert_eq!(check(b""), Err("the file is empty".into()));
        let text = check(b"hello, this is not a model\n").unwrap_err();
        assert!(text.contains("0x68 is not a ModelProto field"), "{text}");
        let iris = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/models/iris/model.onnx")).unwrap();
        let truncated = check(&iris[..iris.len() / 2]).unwrap_err();
        assert!(truncated.contains("it is truncated"), "{truncated}");
        assert!(check(b"\x08").unwrap_err().contains("does not end"));
        assert!(check(b"\x0a\x01x").unwrap_err().contains("0x0a is ModelProto's field 1 with wire type 2, not 0"));
    }

    #[test]
    fn a_text_file_that_starts_like_a_field_is_refused_further_on() {
        // 'B' is opset_import's tag and 'r' metadata_props's; the lengths that follow do not fit.
        assert!(check(b"B\x7fshort").unwrap_err().contains("truncated"));
        let readme = b"readme: this file explains the model and is long enough to hold the first field's bytes ......................................................";
        assert!(check(readme).is_err());
    }

    #[test]
    fn the_size_is_bounded() {
        assert!(check_header(MAX_MODEL_BYTES + 1, b"\x08\x08").unwrap_err().contains("2147483648 bytes"));
    }

    #[test]
    fn unreadable_paths_say_why() {
        let tmp = tempfile::tempdir().unwrap();
        let dangling = tmp.path().join("dangling.onnx");
        std::os::unix::fs::symlink(tmp.path().join("gone"), &dangling).unwrap();
        assert!(check_file(&dangling).unwrap_err().contains("cannot open it"));
        let to_dir = tmp.path().join("dir.onnx");
        std::os::unix::fs::symlink(tmp.path(), &to_dir).unwrap();
        let err = check_file(&to_dir).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let good = tmp.path().join("model.onnx");
        std::fs::write(&good, UNKNOWN_OPERATOR).unwrap();
        assert_eq!(check_file(&good), Ok(()));
    }
}
