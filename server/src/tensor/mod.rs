//! Tensors as the server sees them: a name, a shape and typed, flat, row-major data.

pub(crate) mod data;
mod datatype;

pub use data::TensorData;
pub use datatype::Datatype;

/// A named tensor with a concrete shape; `data.len()` equals the product of `shape`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// Input or output name in the model graph.
    pub name: String,
    /// Concrete dimensions.
    pub shape: Vec<usize>,
    /// Flat row-major elements.
    pub data: TensorData,
}

impl Tensor {
    /// Number of rows: the first dimension, or 1 for a scalar.
    pub fn rows(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Bytes its elements take in memory (strings: their headers and their text).
    pub fn byte_size(&self) -> usize {
        match &self.data {
            TensorData::Bytes(strings) => strings.iter().map(|s| size_of::<String>() + s.len()).sum(),
            data => {
                use data::each;
                each!(data, v => size_of_val(v.as_slice()))
            }
        }
    }
}

/// Number of elements a shape holds.
pub fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}
