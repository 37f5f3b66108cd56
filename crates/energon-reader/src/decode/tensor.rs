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

impl TensorData {
    /// Element `i` as `f64`, unscaled (`None` past the end, and for half floats).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            TensorData::Bool(v) => v.get(i).map(|&x| f64::from(u8::from(x))),
            TensorData::U8(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::I8(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::U16(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::I16(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::U32(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::I32(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::U64(v) => v.get(i).map(|&x| x as f64),
            TensorData::I64(v) => v.get(i).map(|&x| x as f64),
            TensorData::F16(_) => None,
            TensorData::F32(v) => v.get(i).map(|&x| f64::from(x)),
            TensorData::F64(v) => v.get(i).copied(),
        }
    }

    /// Audio samples as `f32` in [-1, 1): signed integers divided by `2^(bits-1)`, unsigned
    /// 8-bit centred on 128 first, floats as they are; `None` for types PCM does not use.
    pub fn pcm_f32(&self) -> Option<Vec<f32>> {
        Some(match self {
            TensorData::U8(v) => v.iter().map(|&x| (f32::from(x) - 128.0) / 128.0).collect(),
            TensorData::I16(v) => v.iter().map(|&x| f32::from(x) / 32768.0).collect(),
            TensorData::I32(v) => v.iter().map(|&x| (f64::from(x) / 2147483648.0) as f32).collect(),
            TensorData::I64(v) => {
                v.iter().map(|&x| (x as f64 / 9.223372036854776e18) as f32).collect()
            }
            TensorData::F32(v) => v.clone(),
            TensorData::F64(v) => v.iter().map(|&x| x as f32).collect(),
            _ => return None,
        })
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

impl Tensor {
    /// Stacks tensors of one element type and rank along a new first axis, zero-padding each to
    /// the largest size of every axis (the reference's `batch_pad_stack`, which its default
    /// batching applies to tensor fields). The result has shape `[n, max_0, max_1, ...]`.
    ///
    /// Fails, saying why, when `tensors` is empty or the element types or ranks differ.
    pub fn stack_padded(tensors: &[&Tensor]) -> Result<Tensor, String> {
        let Some(first) = tensors.first() else {
            return Err("cannot stack an empty list of tensors".to_owned());
        };
        let ndim = first.shape.len();
        let mut max = first.shape.clone();
        for t in tensors {
            if t.shape.len() != ndim {
                return Err(format!(
                    "cannot stack tensors of shapes {:?} and {:?} (different ranks)",
                    first.shape, t.shape
                ));
            }
            if t.dtype() != first.dtype() {
                return Err(format!(
                    "cannot stack tensors of types {} and {}",
                    first.dtype(),
                    t.dtype()
                ));
            }
            for (m, &s) in max.iter_mut().zip(&t.shape) {
                *m = (*m).max(s);
            }
        }
        macro_rules! stack_as {
            ($($variant:ident),*) => {
                match &first.data {
                    $(TensorData::$variant(_) => {
                        let parts: Vec<(&[_], &[usize])> = tensors
                            .iter()
                            .map(|t| match &t.data {
                                TensorData::$variant(v) => (&v[..], &t.shape[..]),
                                _ => unreachable!("element types were checked above"),
                            })
                            .collect();
                        TensorData::$variant(stack_rows(&parts, &max))
                    })*
                }
            };
        }
        let data = stack_as!(Bool, U8, I8, U16, I16, U32, I32, U64, I64, F16, F32, F64);
        let mut shape = Vec::with_capacity(ndim + 1);
        shape.push(tensors.len());
        shape.extend_from_slice(&max);
        Ok(Tensor { shape, data })
    }
}

/// Copies each C-order array (elements and shape) into a zeroed block of shape `max`, one last-axis
/// row at a time.
fn stack_rows<T: Copy + Default>(parts: &[(&[T], &[usize])], max: &[usize]) -> Vec<T> {
    let block: usize = max.iter().product();
    if parts.iter().all(|(_, shape)| *shape == max) {
        // No padding: one copy per tensor, without zeroing the output first.
        let mut out = Vec::with_capacity(block * parts.len());
        for (data, _) in parts {
            out.extend_from_slice(data);
        }
        return out;
    }
    let mut out = vec![T::default(); block * parts.len()];
    for (n, (data, shape)) in parts.iter().enumerate() {
        let base = n * block;
        if shape == &max {
            out[base..base + block].copy_from_slice(data);
            continue;
        }
        let Some((&row_len, outer)) = shape.split_last() else {
            // A scalar: one element.
            out[base] = data[0];
            continue;
        };
        let n_rows: usize = outer.iter().product();
        let mut index = vec![0usize; outer.len()];
        for row in 0..n_rows {
            // Offset of this row in the padded block: the multi-index times max's strides.
            let mut offset = 0;
            for (axis, &i) in index.iter().enumerate() {
                offset = offset * max[axis] + i;
            }
            offset *= max[outer.len()];
            let src = &data[row * row_len..(row + 1) * row_len];
            out[base + offset..base + offset + row_len].copy_from_slice(src);
            // Next multi-index, last axis fastest.
            for axis in (0..outer.len()).rev() {
                index[axis] += 1;
                if index[axis] < outer[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u8s(shape: &[usize], data: &[u8]) -> Tensor {
        Tensor { shape: shape.to_vec(), data: TensorData::U8(data.to_vec()) }
    }

    #[test]
    fn equal_shapes_stack_without_padding() {
        let a = u8s(&[2, 2], &[1, 2, 3, 4]);
        let b = u8s(&[2, 2], &[5, 6, 7, 8]);
        let s = Tensor::stack_padded(&[&a, &b]).unwrap();
        assert_eq!(s.shape, [2, 2, 2]);
        assert_eq!(s.as_u8().unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn smaller_tensors_are_zero_padded_on_every_axis() {
        let a = u8s(&[1, 3], &[1, 2, 3]);
        let b = u8s(&[2, 1], &[4, 5]);
        let s = Tensor::stack_padded(&[&a, &b]).unwrap();
        assert_eq!(s.shape, [2, 2, 3]);
        assert_eq!(s.as_u8().unwrap(), [1, 2, 3, 0, 0, 0, 4, 0, 0, 5, 0, 0]);
    }

    #[test]
    fn three_axes_and_floats() {
        let a = Tensor { shape: vec![1, 2, 2], data: TensorData::F32(vec![1.0, 2.0, 3.0, 4.0]) };
        let b = Tensor { shape: vec![2, 1, 1], data: TensorData::F32(vec![5.0, 6.0]) };
        let s = Tensor::stack_padded(&[&a, &b]).unwrap();
        assert_eq!(s.shape, [2, 2, 2, 2]);
        let want = [1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0];
        assert_eq!(s.as_f32().unwrap(), want);
    }

    #[test]
    fn scalars_and_empty_axes() {
        let a = Tensor { shape: vec![], data: TensorData::I64(vec![7]) };
        let b = Tensor { shape: vec![], data: TensorData::I64(vec![9]) };
        let s = Tensor::stack_padded(&[&a, &b]).unwrap();
        assert_eq!((s.shape, s.data), (vec![2], TensorData::I64(vec![7, 9])));
        let e = u8s(&[0, 2], &[]);
        let f = u8s(&[1, 1], &[3]);
        let s = Tensor::stack_padded(&[&e, &f]).unwrap();
        assert_eq!(s.shape, [2, 1, 2]);
        assert_eq!(s.as_u8().unwrap(), [0, 0, 3, 0]);
    }

    #[test]
    fn mismatches_are_errors() {
        let a = u8s(&[2], &[1, 2]);
        let b = u8s(&[1, 1], &[3]);
        let err = Tensor::stack_padded(&[&a, &b]).unwrap_err();
        assert!(err.contains("different ranks"), "{err}");
        let c = Tensor { shape: vec![2], data: TensorData::F32(vec![1.0, 2.0]) };
        let err = Tensor::stack_padded(&[&a, &c]).unwrap_err();
        assert!(err.contains("uint8 and float32"), "{err}");
        assert!(Tensor::stack_padded(&[]).is_err());
    }
}
