//! The tensor element types of KServe's V2 protocol and their ONNX counterparts.

use std::fmt;

/// A V2 tensor datatype. Every ONNX tensor element type that a JSON number, bool or string can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Datatype {
    /// `BOOL`
    Bool,
    /// `UINT8`
    U8,
    /// `UINT16`
    U16,
    /// `UINT32`
    U32,
    /// `UINT64`
    U64,
    /// `INT8`
    I8,
    /// `INT16`
    I16,
    /// `INT32`
    I32,
    /// `INT64`
    I64,
    /// `FP16`
    F16,
    /// `FP32`
    F32,
    /// `FP64`
    F64,
    /// `BF16`
    Bf16,
    /// `BYTES` (ONNX `string`)
    Bytes,
}

impl Datatype {
    /// Every datatype, in the order the V2 specification lists them.
    pub const ALL: [Datatype; 14] = [
        Datatype::Bool,
        Datatype::U8,
        Datatype::U16,
        Datatype::U32,
        Datatype::U64,
        Datatype::I8,
        Datatype::I16,
        Datatype::I32,
        Datatype::I64,
        Datatype::F16,
        Datatype::F32,
        Datatype::F64,
        Datatype::Bytes,
        Datatype::Bf16,
    ];

    /// The V2 name, e.g. `FP32`.
    pub fn as_str(self) -> &'static str {
        match self {
            Datatype::Bool => "BOOL",
            Datatype::U8 => "UINT8",
            Datatype::U16 => "UINT16",
            Datatype::U32 => "UINT32",
            Datatype::U64 => "UINT64",
            Datatype::I8 => "INT8",
            Datatype::I16 => "INT16",
            Datatype::I32 => "INT32",
            Datatype::I64 => "INT64",
            Datatype::F16 => "FP16",
            Datatype::F32 => "FP32",
            Datatype::F64 => "FP64",
            Datatype::Bf16 => "BF16",
            Datatype::Bytes => "BYTES",
        }
    }

    /// Parses a V2 name; `None` for anything else.
    pub fn parse(name: &str) -> Option<Datatype> {
        Datatype::ALL.into_iter().find(|d| d.as_str() == name)
    }
}

impl fmt::Display for Datatype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for d in Datatype::ALL {
            assert_eq!(Datatype::parse(d.as_str()), Some(d));
        }
        assert_eq!(Datatype::parse("fp32"), None);
        assert_eq!(Datatype::parse("FLOAT"), None);
    }
}
