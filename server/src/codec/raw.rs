//! Raw tensor bytes, as the V2 binary extensions carry them (gRPC's `raw_input_contents` and
//! `raw_output_contents`, REST's binary tensor data): the elements flat, row-major and
//! little-endian, with no padding; `BOOL` one byte each; `BYTES` each element as a 4-byte
//! little-endian length followed by its bytes.

use half::{bf16, f16};

use crate::error::{Error, Result};
use crate::tensor::{Datatype, TensorData};

/// Bytes one element of `datatype` takes, `None` for `BYTES` (variable).
pub fn element_size(datatype: Datatype) -> Option<usize> {
    Some(match datatype {
        Datatype::Bool | Datatype::U8 | Datatype::I8 => 1,
        Datatype::U16 | Datatype::I16 | Datatype::F16 | Datatype::Bf16 => 2,
        Datatype::U32 | Datatype::I32 | Datatype::F32 => 4,
        Datatype::U64 | Datatype::I64 | Datatype::F64 => 8,
        Datatype::Bytes => return None,
    })
}

/// Decodes `count` elements of `datatype` from `bytes`, which must hold exactly that many;
/// `what` names the tensor in errors.
pub fn decode(datatype: Datatype, count: usize, bytes: &[u8], what: &str) -> Result<TensorData> {
    if let Some(size) = element_size(datatype) {
        let needed = count.checked_mul(size).ok_or_else(|| Error::invalid(format!("{what}: shape overflows")))?;
        if bytes.len() != needed {
            return Err(Error::invalid(format!(
                "{what} has {} bytes of raw data but {count} {datatype} elements take {needed}",
                bytes.len()
            )));
        }
    }
    macro_rules! numbers {
        ($variant:ident, $t:ty) => {
            TensorData::$variant(
                bytes
                    .chunks_exact(size_of::<$t>())
                    .map(|c| <$t>::from_le_bytes(c.try_into().expect("exact chunk")))
                    .collect(),
            )
        };
    }
    Ok(match datatype {
        Datatype::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        Datatype::U8 => TensorData::U8(bytes.to_vec()),
        Datatype::I8 => TensorData::I8(bytes.iter().map(|&b| b as i8).collect()),
        Datatype::U16 => numbers!(U16, u16),
        Datatype::U32 => numbers!(U32, u32),
        Datatype::U64 => numbers!(U64, u64),
        Datatype::I16 => numbers!(I16, i16),
        Datatype::I32 => numbers!(I32, i32),
        Datatype::I64 => numbers!(I64, i64),
        Datatype::F16 => numbers!(F16, f16),
        Datatype::Bf16 => numbers!(Bf16, bf16),
        Datatype::F32 => numbers!(F32, f32),
        Datatype::F64 => numbers!(F64, f64),
        Datatype::Bytes => TensorData::Bytes(strings(count, bytes, what)?),
    })
}

/// `BYTES` elements: each a 4-byte little-endian length and that many bytes of UTF-8 without NUL
/// (ONNX Runtime's strings end at NUL).
fn strings(count: usize, mut bytes: &[u8], what: &str) -> Result<Vec<String>> {
    let mut strings = Vec::with_capacity(count.min(bytes.len() / 4));
    while !bytes.is_empty() {
        let index = strings.len();
        let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
            return Err(Error::invalid(format!("{what}: element {index} has a truncated length prefix")));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if rest.len() < len {
            return Err(Error::invalid(format!(
                "{what}: element {index} claims {len} bytes but {} remain",
                rest.len()
            )));
        }
        let (element, rest) = rest.split_at(len);
        strings.push(text(element, &format!("{what}: element {index}"))?);
        bytes = rest;
    }
    if strings.len() != count {
        return Err(Error::invalid(format!("{what} has {} BYTES elements but its shape needs {count}", strings.len())));
    }
    Ok(strings)
}

/// One `BYTES` element as text: UTF-8 with no NUL.
pub fn text(bytes: &[u8], what: &str) -> Result<String> {
    let text = std::str::from_utf8(bytes).map_err(|e| Error::invalid(format!("{what} is not UTF-8: {e}")))?;
    if text.contains('\0') {
        return Err(Error::invalid(format!("{what} holds a NUL byte, which ONNX strings cannot carry")));
    }
    Ok(text.to_owned())
}

/// Encodes the elements as raw bytes.
pub fn encode(data: &TensorData) -> Vec<u8> {
    macro_rules! numbers {
        ($v:expr) => {
            $v.iter().flat_map(|x| x.to_le_bytes()).collect()
        };
    }
    match data {
        TensorData::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
        TensorData::U8(v) => v.clone(),
        TensorData::I8(v) => v.iter().map(|&x| x as u8).collect(),
        TensorData::U16(v) => numbers!(v),
        TensorData::U32(v) => numbers!(v),
        TensorData::U64(v) => numbers!(v),
        TensorData::I16(v) => numbers!(v),
        TensorData::I32(v) => numbers!(v),
        TensorData::I64(v) => numbers!(v),
        TensorData::F16(v) => numbers!(v),
        TensorData::Bf16(v) => numbers!(v),
        TensorData::F32(v) => numbers!(v),
        TensorData::F64(v) => numbers!(v),
        TensorData::Bytes(v) => {
            let mut out = Vec::with_capacity(v.iter().map(|s| 4 + s.len()).sum());
            for s in v {
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_datatype_round_trips() {
        let cases = [
            TensorData::Bool(vec![true, false]),
            TensorData::U8(vec![0, 255]),
            TensorData::I8(vec![-128, 127]),
            TensorData::U16(vec![1, 65535]),
            TensorData::I16(vec![-2, 3]),
            TensorData::U32(vec![7, u32::MAX]),
            TensorData::I32(vec![-7, i32::MAX]),
            TensorData::U64(vec![u64::MAX]),
            TensorData::I64(vec![i64::MIN, 5]),
            TensorData::F16(vec![f16::from_f32(0.5)]),
            TensorData::Bf16(vec![bf16::from_f32(-1.5)]),
            TensorData::F32(vec![1.25, -0.0]),
            TensorData::F64(vec![std::f64::consts::PI]),
            TensorData::Bytes(vec!["héllo".into(), String::new()]),
        ];
        for data in cases {
            let bytes = encode(&data);
            assert_eq!(decode(data.datatype(), data.len(), &bytes, "x").unwrap(), data);
        }
    }

    #[test]
    fn layout_is_little_endian_and_length_prefixed() {
        assert_eq!(encode(&TensorData::F32(vec![1.0])), [0, 0, 0x80, 0x3f]);
        assert_eq!(encode(&TensorData::Bytes(vec!["ab".into()])), [2, 0, 0, 0, b'a', b'b']);
    }

    #[test]
    fn wrong_sizes_are_400s_that_say_why() {
        let err = decode(Datatype::F32, 2, &[0; 7], "input 'x'").unwrap_err();
        assert_eq!(err.to_string(), "input 'x' has 7 bytes of raw data but 2 FP32 elements take 8");
        let err = decode(Datatype::Bytes, 1, &[5, 0, 0, 0, b'a'], "input 'x'").unwrap_err();
        assert_eq!(err.to_string(), "input 'x': element 0 claims 5 bytes but 1 remain");
        let err = decode(Datatype::Bytes, 2, &[1, 0, 0, 0, b'a'], "input 'x'").unwrap_err();
        assert_eq!(err.to_string(), "input 'x' has 1 BYTES elements but its shape needs 2");
        let err = decode(Datatype::Bytes, 1, &[1, 0, 0, 0, 0], "input 'x'").unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
    }
}
