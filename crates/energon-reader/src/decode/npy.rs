//! `npy` parts: numpy's array file format (versions 1 to 3), numeric and boolean dtypes.

use super::tensor::{Tensor, TensorData};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Decodes an `.npy` file into a C-order tensor (Fortran-order arrays are reordered).
pub(crate) fn decode_npy(data: &[u8]) -> Result<Tensor, String> {
    let rest = data.strip_prefix(MAGIC).ok_or("not an npy file (bad magic)")?;
    let (&major, rest) = rest.split_first().ok_or("truncated npy header")?;
    let (_minor, rest) = rest.split_first().ok_or("truncated npy header")?;
    let (header_len, rest) = match major {
        1 => {
            let len = rest.get(..2).ok_or("truncated npy header")?;
            (usize::from(u16::from_le_bytes([len[0], len[1]])), &rest[2..])
        }
        2 | 3 => {
            let len = rest.get(..4).ok_or("truncated npy header")?;
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]);
            (usize::try_from(len).map_err(|_| "npy header too long")?, &rest[4..])
        }
        v => return Err(format!("unsupported npy format version {v}")),
    };
    let header = rest.get(..header_len).ok_or("truncated npy header")?;
    let header = std::str::from_utf8(header).map_err(|_| "npy header is not UTF-8")?;
    let body = &rest[header_len..];
    let descr = dict_value(header, "descr").ok_or("npy header has no descr")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = match dict_value(header, "fortran_order") {
        Some("True") => true,
        Some("False") => false,
        _ => return Err("npy header has no valid fortran_order".to_owned()),
    };
    let shape = parse_shape(dict_value(header, "shape").ok_or("npy header has no shape")?)?;
    let (kind, size, big_endian) = parse_descr(descr)?;
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or("npy shape is too large")?;
    let n_bytes = count.checked_mul(size).ok_or("npy shape is too large")?;
    let raw = body.get(..n_bytes).ok_or_else(|| {
        format!("npy data is truncated: {} bytes for {count} items of {size} bytes", body.len())
    })?;
    let c_order;
    let raw = if fortran && shape.len() > 1 {
        c_order = fortran_to_c(raw, &shape, size);
        &c_order[..]
    } else {
        raw
    };
    let data = typed(raw, kind, size, big_endian)
        .ok_or_else(|| format!("unsupported npy dtype {descr:?}"))?;
    Ok(Tensor { shape, data })
}

/// The text of `'key': value` in a Python dict literal, up to the next top-level comma.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let start = header.find(&format!("'{key}'")).or_else(|| header.find(&format!("\"{key}\"")))?;
    let after = &header[start + key.len() + 2..];
    let after = after.trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0usize;
    for (i, c) in after.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                if depth == 0 {
                    return Some(after[..i].trim());
                }
                depth -= 1;
                if depth == 0 {
                    return Some(after[..=i].trim());
                }
            }
            ',' | '}' if depth == 0 => return Some(after[..i].trim()),
            _ => {}
        }
    }
    None
}

fn parse_shape(text: &str) -> Result<Vec<usize>, String> {
    let inner = text
        .strip_prefix('(')
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| format!("bad npy shape {text:?}"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.trim_end_matches('L').parse::<usize>().map_err(|_| format!("bad npy shape {text:?}"))
        })
        .collect()
}

/// (kind, item size, big endian) of a dtype string such as `<f4` or `|b1`.
fn parse_descr(descr: &str) -> Result<(char, usize, bool), String> {
    let bad = || format!("unsupported npy dtype {descr:?}");
    let mut chars = descr.chars();
    let (order, kind) = match chars.next().ok_or_else(bad)? {
        c @ ('<' | '>' | '|' | '=') => (c, chars.next().ok_or_else(bad)?),
        c => ('=', c),
    };
    let size: usize = chars.as_str().parse().map_err(|_| bad())?;
    let big_endian = order == '>' && size > 1;
    Ok((kind, size, big_endian))
}

fn typed(raw: &[u8], kind: char, size: usize, big_endian: bool) -> Option<TensorData> {
    macro_rules! read {
        ($t:ty) => {{
            raw.chunks_exact(size)
                .map(|c| {
                    let bytes: [u8; std::mem::size_of::<$t>()] =
                        c.try_into().expect("chunks of the item size");
                    if big_endian { <$t>::from_be_bytes(bytes) } else { <$t>::from_le_bytes(bytes) }
                })
                .collect()
        }};
    }
    Some(match (kind, size) {
        ('b', 1) => TensorData::Bool(raw.iter().map(|&b| b != 0).collect()),
        ('u', 1) => TensorData::U8(raw.to_vec()),
        ('i', 1) => TensorData::I8(raw.iter().map(|&b| b as i8).collect()),
        ('u', 2) => TensorData::U16(read!(u16)),
        ('i', 2) => TensorData::I16(read!(i16)),
        ('u', 4) => TensorData::U32(read!(u32)),
        ('i', 4) => TensorData::I32(read!(i32)),
        ('u', 8) => TensorData::U64(read!(u64)),
        ('i', 8) => TensorData::I64(read!(i64)),
        ('f', 2) => TensorData::F16(read!(u16)),
        ('f', 4) => TensorData::F32(read!(f32)),
        ('f', 8) => TensorData::F64(read!(f64)),
        _ => return None,
    })
}

/// Reorders column-major items into row-major order.
fn fortran_to_c(raw: &[u8], shape: &[usize], size: usize) -> Vec<u8> {
    let count = raw.len() / size;
    // Column-major strides (in items).
    let mut strides = vec![1usize; shape.len()];
    for axis in 1..shape.len() {
        strides[axis] = strides[axis - 1] * shape[axis - 1];
    }
    let mut res = Vec::with_capacity(raw.len());
    let mut index = vec![0usize; shape.len()];
    for _ in 0..count {
        let src: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        res.extend_from_slice(&raw[src * size..(src + 1) * size]);
        // Advance the row-major multi-index (last axis fastest).
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    res
}
