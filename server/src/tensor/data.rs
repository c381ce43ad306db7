//! Typed, flat tensor storage with one variant per [`Datatype`].

use half::{bf16, f16};
use serde::{Serialize, Serializer};

use super::Datatype;

/// Flat row-major tensor elements, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// `BOOL`
    Bool(Vec<bool>),
    /// `UINT8`
    U8(Vec<u8>),
    /// `UINT16`
    U16(Vec<u16>),
    /// `UINT32`
    U32(Vec<u32>),
    /// `UINT64`
    U64(Vec<u64>),
    /// `INT8`
    I8(Vec<i8>),
    /// `INT16`
    I16(Vec<i16>),
    /// `INT32`
    I32(Vec<i32>),
    /// `INT64`
    I64(Vec<i64>),
    /// `FP16`
    F16(Vec<f16>),
    /// `FP32`
    F32(Vec<f32>),
    /// `FP64`
    F64(Vec<f64>),
    /// `BF16`
    Bf16(Vec<bf16>),
    /// `BYTES`, carried as UTF-8 strings (ONNX `string`).
    Bytes(Vec<String>),
}

/// Runs `$body` with `$v` bound to the inner vector, whatever the variant. With a leading
/// `[Variant, ...]` list, only those variants are matched: the caller handles the others first.
macro_rules! each {
    ($value:expr, $v:ident => $body:expr) => {
        each!([Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16, Bytes] $value, $v => $body)
    };
    ([$($variant:ident),+] $value:expr, $v:ident => $body:expr) => {
        {
            #[allow(unreachable_patterns)]
            let result = match $value {
                $(TensorData::$variant($v) => $body,)+
                other => unreachable!("{} is handled before `each!`", other.datatype()),
            };
            result
        }
    };
}

pub(crate) use each;

/// Like `each!`, but wraps the result back into the variant it came from.
macro_rules! each_same {
    ($value:expr, $v:ident => $body:expr) => {
        match $value {
            TensorData::Bool($v) => TensorData::Bool($body),
            TensorData::U8($v) => TensorData::U8($body),
            TensorData::U16($v) => TensorData::U16($body),
            TensorData::U32($v) => TensorData::U32($body),
            TensorData::U64($v) => TensorData::U64($body),
            TensorData::I8($v) => TensorData::I8($body),
            TensorData::I16($v) => TensorData::I16($body),
            TensorData::I32($v) => TensorData::I32($body),
            TensorData::I64($v) => TensorData::I64($body),
            TensorData::F16($v) => TensorData::F16($body),
            TensorData::F32($v) => TensorData::F32($body),
            TensorData::F64($v) => TensorData::F64($body),
            TensorData::Bf16($v) => TensorData::Bf16($body),
            TensorData::Bytes($v) => TensorData::Bytes($body),
        }
    };
}

impl TensorData {
    /// The V2 datatype of these elements.
    pub fn datatype(&self) -> Datatype {
        match self {
            TensorData::Bool(_) => Datatype::Bool,
            TensorData::U8(_) => Datatype::U8,
            TensorData::U16(_) => Datatype::U16,
            TensorData::U32(_) => Datatype::U32,
            TensorData::U64(_) => Datatype::U64,
            TensorData::I8(_) => Datatype::I8,
            TensorData::I16(_) => Datatype::I16,
            TensorData::I32(_) => Datatype::I32,
            TensorData::I64(_) => Datatype::I64,
            TensorData::F16(_) => Datatype::F16,
            TensorData::F32(_) => Datatype::F32,
            TensorData::F64(_) => Datatype::F64,
            TensorData::Bf16(_) => Datatype::Bf16,
            TensorData::Bytes(_) => Datatype::Bytes,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each!(self, v => v.len())
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the elements in `start..end`.
    pub fn slice(&self, start: usize, end: usize) -> TensorData {
        each_same!(self, v => v[start..end].to_vec())
    }

    /// Appends `other`; returns it back when its datatype differs.
    pub fn append(&mut self, other: TensorData) -> Result<(), TensorData> {
        match (self, other) {
            (TensorData::Bool(a), TensorData::Bool(b)) => a.extend(b),
            (TensorData::U8(a), TensorData::U8(b)) => a.extend(b),
            (TensorData::U16(a), TensorData::U16(b)) => a.extend(b),
            (TensorData::U32(a), TensorData::U32(b)) => a.extend(b),
            (TensorData::U64(a), TensorData::U64(b)) => a.extend(b),
            (TensorData::I8(a), TensorData::I8(b)) => a.extend(b),
            (TensorData::I16(a), TensorData::I16(b)) => a.extend(b),
            (TensorData::I32(a), TensorData::I32(b)) => a.extend(b),
            (TensorData::I64(a), TensorData::I64(b)) => a.extend(b),
            (TensorData::F16(a), TensorData::F16(b)) => a.extend(b),
            (TensorData::F32(a), TensorData::F32(b)) => a.extend(b),
            (TensorData::F64(a), TensorData::F64(b)) => a.extend(b),
            (TensorData::Bf16(a), TensorData::Bf16(b)) => a.extend(b),
            (TensorData::Bytes(a), TensorData::Bytes(b)) => a.extend(b),
            (_, other) => return Err(other),
        }
        Ok(())
    }
}

impl TensorData {
    /// Serialises element `index` alone, as [`Serialize`] writes it inside an array.
    pub fn serialize_element<S: Serializer>(&self, index: usize, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            TensorData::F16(v) => serializer.serialize_f32(v[index].to_f32()),
            TensorData::Bf16(v) => serializer.serialize_f32(v[index].to_f32()),
            other => {
                each!([Bool, U8, U16, U32, U64, I8, I16, I32, I64, F32, F64, Bytes] other, v => v[index].serialize(serializer))
            }
        }
    }
}

impl Serialize for TensorData {
    /// A flat JSON array; half-precision values are written as their `f32` value.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            TensorData::F16(v) => serializer.collect_seq(v.iter().map(|x| x.to_f32())),
            TensorData::Bf16(v) => serializer.collect_seq(v.iter().map(|x| x.to_f32())),
            other => {
                each!([Bool, U8, U16, U32, U64, I8, I16, I32, I64, F32, F64, Bytes] other, v => v.serialize(serializer))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_and_append_keep_the_type() {
        let mut a = TensorData::I64(vec![1, 2, 3, 4]);
        let tail = a.slice(2, 4);
        assert_eq!(tail, TensorData::I64(vec![3, 4]));
        a.append(tail).unwrap();
        assert_eq!(a.len(), 6);
        assert!(a.append(TensorData::F32(vec![1.0])).is_err());
        assert_eq!(a.datatype(), Datatype::I64);
    }

    #[test]
    fn half_precision_serialises_as_numbers() {
        let v = TensorData::F16(vec![f16::from_f32(0.5), f16::from_f32(-2.25)]);
        assert_eq!(serde_json::to_string(&v).unwrap(), "[0.5,-2.25]");
        let b = TensorData::Bf16(vec![bf16::from_f32(1.5)]);
        assert_eq!(serde_json::to_string(&b).unwrap(), "[1.5]");
        let s = TensorData::Bytes(vec!["a".into()]);
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"["a"]"#);
    }
}
