//! A small n-dimensional array: what images, `npy` parts and audio decode to.

use std::fmt;

/// Element storage of a [`Tensor`], C order (last axis fastest).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TensorData {
    /// `bool` (numpy `|b1`).
    Bool(Vec<bool>),
    /// `u8`.
    U8(Vec<u8>),
    /// `i8`.
    I8(Vec<i8>),
    /// `u16`.
    U16(Vec<u16>),
    /// `i16`.
    I16(Vec<i16>),
    /// `u32`.
    U32(Vec<u32>),
    /// `i32`.
    I32(Vec<i32>),
    /// `u64`.
    U64(Vec<u64>),
    /// `i64`.
    I64(Vec<i64>),
    /// IEEE half floats, as their bit patterns.
    F16(Vec<u16>),
    /// `f32`.
    F32(Vec<f32>),
    /// `f64`.
    F64(Vec<f64>),
}

impl TensorData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::Bool(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::I8(v) => v.len(),
            TensorData::U16(v) | TensorData::F16(v) => v.len(),
            TensorData::I16(v) => v.len(),
            TensorData::U32(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::U64(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::F32(v) => v.len(),
            TensorData::F64(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The numpy name of the element type (`uint8`, `float32`, ...).
    pub fn dtype(&self) -> &'static str {
        match self {
            TensorData::Bool(_) => "bool",
            TensorData::U8(_) => "uint8",
            TensorData::I8(_) => "int8",
            TensorData::U16(_) => "uint16",
            TensorData::I16(_) => "int16",
            TensorData::U32(_) => "uint32",
            TensorData::I32(_) => "int32",
            TensorData::U64(_) => "uint64",
            TensorData::I64(_) => "int64",
            TensorData::F16(_) => "float16",
            TensorData::F32(_) => "float32",
            TensorData::F64(_) => "float64",
        }
    }
}

/// An n-dimensional array in C order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The size of each axis (`[H, W, C]` for an HWC image, `[C, H, W]` for CHW).
    pub shape: Vec<usize>,
    /// The elements; their number is the product of `shape`.
    pub data: TensorData,
}

impl Tensor {
    /// The elements as `u8`, if that is their type.
    pub fn as_u8(&self) -> Option<&[u8]> {
        match &self.data {
            TensorData::U8(v) => Some(v),
            _ => None,
        }
    }

    /// The elements as `f32`, if that is their type.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The numpy name of the element type.
    pub fn dtype(&self) -> &'static str {
        self.data.dtype()
    }
}

impl fmt::Display for Tensor {
    /// `Tensor(shape=[32, 32, 3], dtype=uint8)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tensor(shape={:?}, dtype={})", self.shape, self.dtype())
    }
}
