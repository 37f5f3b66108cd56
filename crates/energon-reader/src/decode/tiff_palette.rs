//! Palette (`RGBPalette`) TIFF images, which the `image` crate does not decode, as Pillow opens
//! them: mode `P` (1, 2, 4 or 8 bits per index) with the 16-bit `ColorMap` reduced to 8 bits by
//! its high byte, converted to RGB by looking the indices up (and to `L` and `RGBA` from those
//! colours, as Pillow's palette conversions do).
//!
//! The indices are read by the `tiff` crate (its decompression and strip/tile handling) from a
//! copy of the file whose first image is relabelled as grayscale (`BlackIsZero`), which the
//! crate decodes to the raw index values.

use std::io::Cursor;

use tiff::{
    ColorType,
    decoder::{Decoder, DecodingResult, Limits},
    tags::Tag,
};

/// `PhotometricInterpretation`, TIFF tag 262.
const PHOTOMETRIC: u16 = 262;
/// The photometric values: `BlackIsZero` and `RGBPalette`.
const BLACK_IS_ZERO: u16 = 1;
const RGB_PALETTE: u16 = 3;

/// The byte offset of the value of the first image's `PhotometricInterpretation` entry in a
/// classic (not Big) TIFF, when that value is `RGBPalette`; `None` for anything else.
fn palette_photometric_offset(data: &[u8]) -> Option<(usize, bool)> {
    let big_endian = match data.get(..4)? {
        b"II*\0" => false,
        b"MM\0*" => true,
        _ => return None,
    };
    let u16_at = |o: usize| {
        let b: [u8; 2] = data.get(o..o + 2)?.try_into().ok()?;
        Some(if big_endian { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    };
    let u32_at = |o: usize| {
        let b: [u8; 4] = data.get(o..o + 4)?.try_into().ok()?;
        Some(if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    };
    let ifd = usize::try_from(u32_at(4)?).ok()?;
    let entries = usize::from(u16_at(ifd)?);
    (0..entries).map(|i| ifd + 2 + 12 * i).find_map(|entry| {
        // A SHORT (type 3) of count 1: the value is the first two bytes of the value field.
        let is_palette = u16_at(entry)? == PHOTOMETRIC
            && u16_at(entry + 2)? == 3
            && u32_at(entry + 4)? == 1
            && u16_at(entry + 8)? == RGB_PALETTE;
        is_palette.then_some((entry + 8, big_endian))
    })
}

/// Whether the content is a TIFF whose first image is a palette image.
pub(super) fn is_palette_tiff(data: &[u8]) -> bool {
    palette_photometric_offset(data).is_some()
}

/// A palette image: its size and its pixels as RGB.
pub(super) struct PaletteImage {
    pub(super) width: usize,
    pub(super) height: usize,
    pub(super) rgb: Vec<u8>,
}

/// The size of a palette TIFF from its header, for the pixel limit.
pub(super) fn dimensions(data: &[u8]) -> Result<(u32, u32), String> {
    let relabelled = relabel(data)?;
    let mut decoder = Decoder::new(Cursor::new(&relabelled[..])).map_err(|e| e.to_string())?;
    decoder.dimensions().map_err(|e| e.to_string())
}

fn relabel(data: &[u8]) -> Result<Vec<u8>, String> {
    let (offset, big_endian) =
        palette_photometric_offset(data).ok_or("not a palette TIFF image")?;
    let mut copy = data.to_vec();
    let value = if big_endian { BLACK_IS_ZERO.to_be_bytes() } else { BLACK_IS_ZERO.to_le_bytes() };
    copy[offset..offset + 2].copy_from_slice(&value);
    Ok(copy)
}

/// Decodes the first image of a palette TIFF to RGB, as Pillow's `convert("RGB")` gives it.
pub(super) fn decode(data: &[u8]) -> Result<PaletteImage, String> {
    let relabelled = relabel(data)?;
    let mut decoder = Decoder::new(Cursor::new(&relabelled[..]))
        .map_err(|e| e.to_string())?
        .with_limits(Limits::unlimited());
    let bits = match decoder.colortype().map_err(|e| e.to_string())? {
        ColorType::Gray(b @ (1 | 2 | 4 | 8)) => b,
        other => return Err(format!("unsupported palette image layout {other:?}")),
    };
    let (width, height) = decoder.dimensions().map_err(|e| e.to_string())?;
    let (width, height) = (width as usize, height as usize);
    let colors = 1usize << bits;
    let map: Vec<u16> = decoder
        .find_tag_unsigned_vec(Tag::ColorMap)
        .map_err(|e| e.to_string())?
        .ok_or("palette image without a ColorMap")?;
    if map.len() < 3 * colors {
        return Err(format!("ColorMap of {} values for {colors} colours", map.len()));
    }
    // Pillow keeps the high byte of each 16-bit component; the map lists all reds, then all
    // greens, then all blues.
    let palette: Vec<[u8; 3]> = (0..colors)
        .map(|i| [map[i], map[colors + i], map[2 * colors + i]].map(|v| (v >> 8) as u8))
        .collect();
    let DecodingResult::U8(indices) = decoder.read_image().map_err(|e| e.to_string())? else {
        return Err("unexpected palette index type".to_owned());
    };
    // Rows of sub-byte indices are packed, most significant bits first, each row starting on a
    // byte.
    let bits = usize::from(bits);
    let row_bytes = (width * bits).div_ceil(8);
    if indices.len() < row_bytes * height {
        return Err("palette image data is truncated".to_owned());
    }
    let mut rgb = Vec::with_capacity(width * height * 3);
    for row in indices.chunks_exact(row_bytes).take(height) {
        for x in 0..width {
            let bit = x * bits;
            let index = (row[bit / 8] >> (8 - bits - bit % 8)) & ((1u16 << bits) - 1) as u8;
            rgb.extend_from_slice(&palette[usize::from(index)]);
        }
    }
    Ok(PaletteImage { width, height, rgb })
}
