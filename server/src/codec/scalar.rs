//! JSON tensor data: flattening nested arrays into leaves, and typing the leaves.

use std::fmt;

use half::{bf16, f16};
use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};

use crate::tensor::{Datatype, TensorData};

/// One JSON leaf of a tensor's data, before its datatype is applied.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// `true` / `false`
    Bool(bool),
    /// A negative integer.
    Int(i64),
    /// A non-negative integer.
    UInt(u64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A string.
    Str(String),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::UInt(u) => write!(f, "{u}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// The leaves of a JSON array, nested or flat, in row-major order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FlatData(pub Vec<Scalar>);

impl<'de> Deserialize<'de> for FlatData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut leaves = Vec::new();
        deserializer.deserialize_seq(Leaves(&mut leaves))?;
        Ok(FlatData(leaves))
    }
}

/// Pushes every leaf it visits onto the vector; recurses into arrays.
struct Leaves<'a>(&'a mut Vec<Scalar>);

impl<'de> DeserializeSeed<'de> for Leaves<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Leaves<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of numbers, booleans or strings")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Some(n) = seq.size_hint() {
            self.0.reserve(n);
        }
        while seq.next_element_seed(Leaves(self.0))?.is_some() {}
        Ok(())
    }
    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.push(Scalar::Bool(v));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.0.push(if v < 0 { Scalar::Int(v) } else { Scalar::UInt(v as u64) });
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.0.push(Scalar::UInt(v));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.0.push(Scalar::Float(v));
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.push(Scalar::Str(v.to_owned()));
        Ok(())
    }
    fn visit_string<E>(self, v: String) -> Result<(), E> {
        self.0.push(Scalar::Str(v));
        Ok(())
    }
}

/// Types the leaves as `datatype`; the error names the first element that does not fit.
pub fn typed(datatype: Datatype, leaves: Vec<Scalar>) -> Result<TensorData, String> {
    Ok(match datatype {
        Datatype::Bool => TensorData::Bool(each_leaf(datatype, leaves, |s| match s {
            Scalar::Bool(b) => Ok(b),
            other => Err(other),
        })?),
        Datatype::U8 => TensorData::U8(integers(datatype, leaves)?),
        Datatype::U16 => TensorData::U16(integers(datatype, leaves)?),
        Datatype::U32 => TensorData::U32(integers(datatype, leaves)?),
        Datatype::U64 => TensorData::U64(integers(datatype, leaves)?),
        Datatype::I8 => TensorData::I8(integers(datatype, leaves)?),
        Datatype::I16 => TensorData::I16(integers(datatype, leaves)?),
        Datatype::I32 => TensorData::I32(integers(datatype, leaves)?),
        Datatype::I64 => TensorData::I64(integers(datatype, leaves)?),
        Datatype::F16 => TensorData::F16(floats(datatype, leaves, f16::from_f64)?),
        Datatype::F32 => TensorData::F32(floats(datatype, leaves, |x| x as f32)?),
        Datatype::F64 => TensorData::F64(floats(datatype, leaves, |x| x)?),
        Datatype::Bf16 => TensorData::Bf16(floats(datatype, leaves, bf16::from_f64)?),
        Datatype::Bytes => TensorData::Bytes(each_leaf(datatype, leaves, |s| match s {
            Scalar::Str(s) => Ok(s),
            other => Err(other),
        })?),
    })
}

fn each_leaf<T>(
    datatype: Datatype,
    leaves: Vec<Scalar>,
    convert: impl Fn(Scalar) -> Result<T, Scalar>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::with_capacity(leaves.len());
    for (i, leaf) in leaves.into_iter().enumerate() {
        match convert(leaf) {
            Ok(v) => out.push(v),
            Err(leaf) => return Err(format!("element {i} is {leaf}, which is not a valid {datatype} value")),
        }
    }
    Ok(out)
}

fn integers<T: TryFrom<i64> + TryFrom<u64>>(datatype: Datatype, leaves: Vec<Scalar>) -> Result<Vec<T>, String> {
    each_leaf(datatype, leaves, |s| match s {
        Scalar::Int(i) => T::try_from(i).map_err(|_| s),
        Scalar::UInt(u) => T::try_from(u).map_err(|_| s),
        other => Err(other),
    })
}

fn floats<T>(datatype: Datatype, leaves: Vec<Scalar>, from_f64: impl Fn(f64) -> T) -> Result<Vec<T>, String> {
    each_leaf(datatype, leaves, |s| match s {
        Scalar::Float(x) => Ok(from_f64(x)),
        Scalar::Int(i) => Ok(from_f64(i as f64)),
        Scalar::UInt(u) => Ok(from_f64(u as f64)),
        other => Err(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(json: &str) -> Vec<Scalar> {
        serde_json::from_str::<FlatData>(json).unwrap().0
    }

    #[test]
    fn nested_and_flat_arrays_give_the_same_leaves() {
        assert_eq!(leaves("[[1,2],[3,4]]"), leaves("[1,2,3,4]"));
        assert_eq!(leaves("[[[true]],[[false]]]"), vec![Scalar::Bool(true), Scalar::Bool(false)]);
        assert_eq!(leaves("[]"), vec![]);
    }

    #[test]
    fn a_bare_scalar_or_object_is_rejected() {
        assert!(serde_json::from_str::<FlatData>("3").is_err());
        assert!(serde_json::from_str::<FlatData>("[{\"a\":1}]").is_err());
        assert!(serde_json::from_str::<FlatData>("[null]").is_err());
    }

    #[test]
    fn every_datatype_accepts_its_values() {
        let cases: Vec<(Datatype, &str, TensorData)> = vec![
            (Datatype::Bool, "[true,false]", TensorData::Bool(vec![true, false])),
            (Datatype::U8, "[0,255]", TensorData::U8(vec![0, 255])),
            (Datatype::U16, "[65535]", TensorData::U16(vec![65535])),
            (Datatype::U32, "[4294967295]", TensorData::U32(vec![u32::MAX])),
            (Datatype::U64, "[18446744073709551615]", TensorData::U64(vec![u64::MAX])),
            (Datatype::I8, "[-128,127]", TensorData::I8(vec![-128, 127])),
            (Datatype::I16, "[-32768]", TensorData::I16(vec![i16::MIN])),
            (Datatype::I32, "[-2147483648]", TensorData::I32(vec![i32::MIN])),
            (Datatype::I64, "[-9223372036854775808]", TensorData::I64(vec![i64::MIN])),
            (Datatype::F16, "[0.5,65504]", TensorData::F16(vec![f16::from_f32(0.5), f16::MAX])),
            (Datatype::F32, "[1.5,2]", TensorData::F32(vec![1.5, 2.0])),
            (Datatype::F64, "[1e300,-3]", TensorData::F64(vec![1e300, -3.0])),
            (Datatype::Bf16, "[1.5]", TensorData::Bf16(vec![bf16::from_f32(1.5)])),
            (Datatype::Bytes, r#"["ab","ü"]"#, TensorData::Bytes(vec!["ab".into(), "ü".into()])),
        ];
        for (dt, json, want) in cases {
            assert_eq!(typed(dt, leaves(json)).unwrap(), want, "{dt}");
        }
    }

    #[test]
    fn wrong_kinds_and_out_of_range_values_are_named() {
        let cases = [
            (Datatype::U8, "[1,256]", "element 1 is 256, which is not a valid UINT8 value"),
            (Datatype::U32, "[-1]", "element 0 is -1, which is not a valid UINT32 value"),
            (Datatype::I8, "[-129]", "element 0 is -129, which is not a valid INT8 value"),
            (Datatype::I64, "[1.5]", "element 0 is 1.5, which is not a valid INT64 value"),
            (Datatype::F32, r#"[1,"x"]"#, "element 1 is \"x\", which is not a valid FP32 value"),
            (Datatype::Bool, "[1]", "element 0 is 1, which is not a valid BOOL value"),
            (Datatype::Bytes, "[1]", "element 0 is 1, which is not a valid BYTES value"),
        ];
        for (dt, json, want) in cases {
            assert_eq!(typed(dt, leaves(json)).unwrap_err(), want);
        }
    }
}
