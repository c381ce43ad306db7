//! JSON tensor data, decoded straight into typed elements: each leaf of a nested or flat array is
//! converted to the tensor's element type as it is parsed, so decoding costs the typed vector and
//! nothing per element besides (no tree of JSON values, no list of untyped leaves), and it stops
//! at the first element past the count it was given.

use std::borrow::Cow;
use std::fmt;

use half::{bf16, f16};
use serde::de::{DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::tensor::{Datatype, TensorData};
use skiff_http::response::brief;

/// Deepest nesting of arrays taken (a tensor's rank, plus one for V1's rows).
pub const MAX_DEPTH: usize = 32;

/// One JSON leaf of a tensor's data, before its datatype is applied.
#[derive(Debug, Clone, PartialEq)]
pub enum Leaf<'a> {
    /// `true` / `false`
    Bool(bool),
    /// A negative integer.
    Int(i64),
    /// A non-negative integer.
    UInt(u64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A string.
    Str(Cow<'a, str>),
}

impl fmt::Display for Leaf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Leaf::Bool(b) => write!(f, "{b}"),
            Leaf::Int(i) => write!(f, "{i}"),
            Leaf::UInt(u) => write!(f, "{u}"),
            Leaf::Float(x) => write!(f, "{x:?}"),
            Leaf::Str(s) => f.write_str(&brief(s)),
        }
    }
}

/// Why a leaf does not fit an element type.
enum Refusal {
    /// Wrong kind, or an integer out of range.
    Invalid,
    /// A float whose magnitude the type cannot hold (it would become ±inf).
    OutOfRange,
    /// A string with a NUL byte (ONNX Runtime's strings end at NUL).
    Nul,
}

/// A tensor element type and how a JSON leaf becomes one.
trait Element: Sized {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<Self, Refusal>;
}

impl Element for bool {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<bool, Refusal> {
        match leaf {
            Leaf::Bool(b) => Ok(*b),
            _ => Err(Refusal::Invalid),
        }
    }
}

macro_rules! integer {
    ($($t:ty),+) => {$(
        impl Element for $t {
            fn from_leaf(leaf: &Leaf<'_>) -> Result<$t, Refusal> {
                match leaf {
                    Leaf::Int(i) => <$t>::try_from(*i).map_err(|_| Refusal::Invalid),
                    Leaf::UInt(u) => <$t>::try_from(*u).map_err(|_| Refusal::Invalid),
                    _ => Err(Refusal::Invalid),
                }
            }
        }
    )+};
}
integer!(u8, u16, u32, u64, i8, i16, i32, i64);

/// A JSON number as f64, or why not.
fn number(leaf: &Leaf<'_>) -> Result<f64, Refusal> {
    match leaf {
        Leaf::Float(x) => Ok(*x),
        Leaf::Int(i) => Ok(*i as f64),
        Leaf::UInt(u) => Ok(*u as f64),
        _ => Err(Refusal::Invalid),
    }
}

/// Narrows a finite f64; a value that overflows to ±inf is refused rather than silently kept.
fn narrow<T>(leaf: &Leaf<'_>, from_f64: impl Fn(f64) -> T, is_infinite: impl Fn(&T) -> bool) -> Result<T, Refusal> {
    let narrowed = from_f64(number(leaf)?);
    if is_infinite(&narrowed) { Err(Refusal::OutOfRange) } else { Ok(narrowed) }
}

impl Element for f64 {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<f64, Refusal> {
        number(leaf)
    }
}

impl Element for f32 {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<f32, Refusal> {
        narrow(leaf, |x| x as f32, |x| x.is_infinite())
    }
}

impl Element for f16 {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<f16, Refusal> {
        narrow(leaf, f16::from_f64, |x| x.is_infinite())
    }
}

impl Element for bf16 {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<bf16, Refusal> {
        narrow(leaf, bf16::from_f64, |x| x.is_infinite())
    }
}

impl Element for String {
    fn from_leaf(leaf: &Leaf<'_>) -> Result<String, Refusal> {
        match leaf {
            Leaf::Str(s) if s.contains('\0') => Err(Refusal::Nul),
            Leaf::Str(s) => Ok(s.clone().into_owned()),
            _ => Err(Refusal::Invalid),
        }
    }
}

/// Decoded data: the typed elements and the shape of the nesting they came in.
#[derive(Debug, PartialEq)]
pub struct Decoded {
    /// The elements, row-major.
    pub data: TensorData,
    /// Lengths of the nested arrays, outermost first (`[n]` for a flat array of n).
    pub shape: Vec<usize>,
}

/// Decodes `raw` (a JSON array, nested or flat) into elements of `datatype`, refusing more than
/// `max_elements`; with `rectangular`, arrays at the same depth must have the same length and
/// every leaf must be at the same depth. The error names the first element that does not fit.
pub fn typed(datatype: Datatype, raw: &RawValue, max_elements: usize, rectangular: bool) -> Result<Decoded, String> {
    macro_rules! walk {
        ($variant:ident, $t:ty) => {{
            let (values, shape) = walk::<$t>(datatype, raw, max_elements, rectangular)?;
            Decoded { data: TensorData::$variant(values), shape }
        }};
    }
    Ok(match datatype {
        Datatype::Bool => walk!(Bool, bool),
        Datatype::U8 => walk!(U8, u8),
        Datatype::U16 => walk!(U16, u16),
        Datatype::U32 => walk!(U32, u32),
        Datatype::U64 => walk!(U64, u64),
        Datatype::I8 => walk!(I8, i8),
        Datatype::I16 => walk!(I16, i16),
        Datatype::I32 => walk!(I32, i32),
        Datatype::I64 => walk!(I64, i64),
        Datatype::F16 => walk!(F16, f16),
        Datatype::F32 => walk!(F32, f32),
        Datatype::F64 => walk!(F64, f64),
        Datatype::Bf16 => walk!(Bf16, bf16),
        Datatype::Bytes => walk!(Bytes, String),
    })
}

/// Decodes one V1 instance's value for an input: an array as [`typed`] does, or a bare leaf as
/// a tensor of shape `[]`.
pub fn typed_row(datatype: Datatype, raw: &RawValue) -> Result<Decoded, String> {
    if raw.get().starts_with('[') {
        return typed(datatype, raw, usize::MAX, true);
    }
    let wrapped = RawValue::from_string(format!("[{}]", raw.get())).map_err(|e| e.to_string())?;
    let Decoded { data, .. } = typed(datatype, &wrapped, 1, true)?;
    Ok(Decoded { data, shape: Vec::new() })
}

/// Most elements a JSON array of `len` bytes can hold: each but the last takes a digit and a comma.
pub fn most_elements(len: usize) -> usize {
    len / 2 + 1
}

fn walk<T: Element>(
    datatype: Datatype,
    raw: &RawValue,
    max_elements: usize,
    rectangular: bool,
) -> Result<(Vec<T>, Vec<usize>), String> {
    let capacity = max_elements.min(most_elements(raw.get().len()));
    let mut walk = Walk {
        values: Vec::with_capacity(capacity),
        dims: Vec::new(),
        leaf_depth: None,
        datatype,
        max_elements,
        rectangular,
        rows: 0,
        refused: None,
    };
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    let parsed = deserializer.deserialize_seq(Level { walk: &mut walk, depth: 0 });
    if let Some(refused) = walk.refused {
        return Err(refused);
    }
    parsed.map_err(|e| e.to_string())?;
    if rectangular && walk.leaf_depth.is_some_and(|depth| depth != walk.dims.len()) {
        // Leaves beside arrays at the same depth (`[[], 1]`): an array deeper than the leaves.
        return Err("nested arrays are not rectangular".into());
    }
    let depth = walk.leaf_depth.unwrap_or(walk.dims.len());
    let shape = walk.dims.iter().take(depth).map(|d| d.unwrap_or(0)).collect();
    Ok((walk.values, shape))
}

/// The state of one decode: elements so far, the length seen at each depth, the leaves' depth.
struct Walk<T> {
    values: Vec<T>,
    dims: Vec<Option<usize>>,
    leaf_depth: Option<usize>,
    datatype: Datatype,
    max_elements: usize,
    rectangular: bool,
    /// Items of the outermost array read so far (which row a shape error is in).
    rows: usize,
    /// Our own refusal, kept whole (serde's custom errors add a position to the message).
    refused: Option<String>,
}

impl<T: Element> Walk<T> {
    fn refuse<E: serde::de::Error>(&mut self, why: String) -> E {
        self.refused = Some(why);
        E::custom("refused")
    }

    fn not_rectangular<E: serde::de::Error>(&mut self) -> E {
        let row = self.rows;
        self.refuse(format!("nested arrays are not rectangular (in row {row})"))
    }

    fn leaf<E: serde::de::Error>(&mut self, depth: usize, leaf: Leaf<'_>) -> Result<(), E> {
        if self.rectangular && *self.leaf_depth.get_or_insert(depth) != depth {
            return Err(self.not_rectangular());
        }
        let i = self.values.len();
        if i == self.max_elements {
            return Err(self.refuse(format!("has more than {} elements", self.max_elements)));
        }
        let datatype = self.datatype;
        match T::from_leaf(&leaf) {
            Ok(v) => {
                self.values.push(v);
                Ok(())
            }
            Err(Refusal::Invalid) => {
                Err(self.refuse(format!("element {i} is {leaf}, which is not a valid {datatype} value")))
            }
            Err(Refusal::OutOfRange) => {
                Err(self.refuse(format!("element {i} is {leaf}, which is out of range for {datatype}")))
            }
            Err(Refusal::Nul) => Err(self.refuse(format!(
                "element {i} holds a NUL byte, which a {datatype} element cannot (ONNX Runtime strings end at NUL)"
            ))),
        }
    }

    fn array_end<E: serde::de::Error>(&mut self, depth: usize, len: usize) -> Result<(), E> {
        if self.dims.len() <= depth {
            self.dims.resize(depth + 1, None);
        }
        match self.dims[depth] {
            Some(seen) if seen != len && self.rectangular => Err(self.not_rectangular()),
            Some(_) => Ok(()),
            None => {
                self.dims[depth] = Some(len);
                Ok(())
            }
        }
    }
}

/// One level of nesting: an array whose items are leaves or deeper arrays.
struct Level<'w, T> {
    walk: &'w mut Walk<T>,
    depth: usize,
}

impl<'de, T: Element> DeserializeSeed<'de> for Level<'_, T> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Element> Visitor<'de> for Level<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of numbers, booleans or strings")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.depth == MAX_DEPTH {
            return Err(self.walk.refuse(format!("arrays are nested deeper than {MAX_DEPTH}")));
        }
        let mut len = 0;
        while seq.next_element_seed(Level { walk: &mut *self.walk, depth: self.depth + 1 })?.is_some() {
            len += 1;
            if self.depth == 0 {
                self.walk.rows = len;
            }
        }
        self.walk.array_end(self.depth, len)
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.leaf(Leaf::Bool(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.leaf(if v < 0 { Leaf::Int(v) } else { Leaf::UInt(v as u64) })
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.leaf(Leaf::UInt(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        self.leaf(Leaf::Float(v))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.leaf(Leaf::Str(Cow::Borrowed(v)))
    }
    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<(), E> {
        self.leaf(Leaf::Str(Cow::Owned(v)))
    }
}

impl<T: Element> Level<'_, T> {
    fn leaf<E: serde::de::Error>(self, leaf: Leaf<'_>) -> Result<(), E> {
        if self.depth == 0 {
            return Err(self.walk.refuse(format!("must be an array, not {leaf}")));
        }
        self.walk.leaf(self.depth, leaf)
    }
}
