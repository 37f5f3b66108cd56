//! Image metadata from headers: size, Pillow format name and Pillow mode, without decoding
//! pixels.
//!
//! The `image` crate recognizes the format and reads the dimensions (and the color type of
//! TIFF and WebP) from the header; the few header bytes that decide Pillow's mode beyond that
//! (PNG bit depth and palette, JPEG component count, GIF and BMP palettes) are read here. ICO
//! and JPEG 2000, which the `image` crate is not built with, are read here entirely.

use std::io::Cursor;

use image::{ExtendedColorType, ImageDecoder, ImageFormat, ImageReader};

use super::ImageMetadata;

/// Why an image's header gives no metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// The header ends early (`PNG header`, `BMP palette`, ...).
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// The header is there but inconsistent.
    #[error("{0}")]
    Damaged(String),
    /// No known format, or a format or layout this does not read.
    #[error("{0}")]
    Unsupported(String),
    /// The `image` crate cannot read the header.
    #[error("cannot read the {format} header: {reason}")]
    Unreadable {
        /// The format (`image` before it is known).
        format: &'static str,
        /// The `image` crate's reason.
        reason: String,
    },
}

/// Reads the metadata of an encoded image from its header.
///
/// The reason of an error says what is wrong: an unknown or unsupported format, a truncated or
/// damaged header. Pixel data is not decoded, so damage after the header goes unnoticed.
pub fn probe_image(data: &[u8]) -> Result<ImageMetadata, HeaderError> {
    if data.starts_with(&[0, 0, 1, 0]) {
        return ico(data);
    }
    if data.starts_with(JP2_SIGNATURE) || data.starts_with(&[0xff, 0x4f, 0xff, 0x51]) {
        return jpeg2000(data);
    }
    if data.starts_with(&[0xff, 0xd8, 0xff]) {
        // Read here: the `image` crate is built without a JPEG decoder.
        let (width, height, mode) = jpeg_header(data)?;
        let (format, mode) = ("JPEG".to_owned(), mode.to_owned());
        return Ok(ImageMetadata { width, height, format, mode });
    }
    let reader = ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(|e| HeaderError::Unreadable { format: "image", reason: e.to_string() })?;
    let Some(format) = reader.format() else {
        return Err(HeaderError::Unsupported("not an image of a known format".to_owned()));
    };
    let name = pil_format_name(format)
        .ok_or_else(|| HeaderError::Unsupported(format!("unsupported image format {format:?}")))?;
    let decoder = reader
        .into_decoder()
        .map_err(|e| HeaderError::Unreadable { format: name, reason: e.to_string() })?;
    let (mut width, mut height) = decoder.dimensions();
    let has_alpha = decoder.color_type().has_alpha();
    let color = decoder.original_color_type();
    let mode = match format {
        ImageFormat::Png => png_mode(data)?,
        ImageFormat::Jpeg => jpeg_header(data)?.2,
        ImageFormat::Gif => {
            let gif = gif_info(data)?;
            (width, height) = (gif.width, gif.height);
            gif.mode
        }
        ImageFormat::Bmp => bmp_mode(data)?,
        ImageFormat::WebP => {
            if has_alpha {
                "RGBA"
            } else {
                "RGB"
            }
        }
        _ => tiff_mode(color)?,
    };
    Ok(ImageMetadata { width, height, format: name.to_owned(), mode: mode.to_owned() })
}

/// Pillow's format name for the formats read through the `image` crate.
fn pil_format_name(format: ImageFormat) -> Option<&'static str> {
    Some(match format {
        ImageFormat::Png => "PNG",
        ImageFormat::Jpeg => "JPEG",
        ImageFormat::Gif => "GIF",
        ImageFormat::Bmp => "BMP",
        ImageFormat::WebP => "WEBP",
        ImageFormat::Tiff => "TIFF",
        _ => return None,
    })
}

fn be16(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn be32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn le16(data: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?))
}

fn le32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// PNG: the mode from the `IHDR` bit depth and color type (Pillow's table).
fn png_mode(data: &[u8]) -> Result<&'static str, HeaderError> {
    let (Some(&depth), Some(&color)) = (data.get(24), data.get(25)) else {
        return Err(HeaderError::Truncated("PNG header"));
    };
    Ok(match (depth, color) {
        (1, 0) => "1",
        (2 | 4 | 8, 0) => "L",
        (16, 0) => "I;16",
        (8 | 16, 2) => "RGB",
        (1 | 2 | 4 | 8, 3) => "P",
        (8, 4) => "LA",
        (16, 4) | (8 | 16, 6) => "RGBA",
        _ => {
            return Err(HeaderError::Unsupported(format!(
                "PNG with bit depth {depth} and color type {color}"
            )));
        }
    })
}

/// JPEG: width, height and the mode (from the component count) of the first frame header
/// (`SOFn`).
pub(super) fn jpeg_header(data: &[u8]) -> Result<(u32, u32, &'static str), HeaderError> {
    let mut i = 2;
    loop {
        // Markers may be preceded by fill bytes 0xff.
        while data.get(i) == Some(&0xff) && data.get(i + 1) == Some(&0xff) {
            i += 1;
        }
        let (Some(&0xff), Some(&marker)) = (data.get(i), data.get(i + 1)) else {
            return Err(HeaderError::Damaged(
                "truncated or damaged JPEG header (no frame header found)".to_owned(),
            ));
        };
        i += 2;
        if marker == 0x01 || (0xd0..=0xd8).contains(&marker) {
            continue;
        }
        let len = usize::from(be16(data, i).ok_or(HeaderError::Truncated("JPEG header"))?);
        let is_sof = (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc);
        if is_sof {
            let truncated = || HeaderError::Truncated("JPEG frame header");
            let height = u32::from(be16(data, i + 3).ok_or_else(truncated)?);
            let width = u32::from(be16(data, i + 5).ok_or_else(truncated)?);
            let mode = match *data.get(i + 7).ok_or_else(truncated)? {
                1 => "L",
                3 => "RGB",
                4 => "CMYK",
                n => return Err(HeaderError::Unsupported(format!("JPEG with {n} components"))),
            };
            return Ok((width, height, mode));
        }
        if marker == 0xda || len < 2 {
            return Err(HeaderError::Damaged(
                "damaged JPEG header (scan before the frame header)".to_owned(),
            ));
        }
        i += len;
    }
}

struct GifInfo {
    width: u32,
    height: u32,
    mode: &'static str,
}

/// Whether a GIF palette is not the identity grey ramp (entry `i` = `(i, i, i)`), in which case
/// Pillow keeps it and the image is `P` rather than `L`.
fn palette_needed(palette: &[u8]) -> bool {
    palette.chunks(3).enumerate().any(|(i, rgb)| rgb.iter().any(|&c| usize::from(c) != i))
}

/// GIF: the size (grown to the first frame's extent, as Pillow does) and the mode of the first
/// frame (`P` with a palette, `L` without one or with a grey-ramp palette).
fn gif_info(data: &[u8]) -> Result<GifInfo, HeaderError> {
    let truncated = || HeaderError::Truncated("GIF header");
    let mut width = u32::from(le16(data, 6).ok_or_else(truncated)?);
    let mut height = u32::from(le16(data, 8).ok_or_else(truncated)?);
    let flags = *data.get(10).ok_or_else(truncated)?;
    let mut i = 13;
    let mut global = false;
    if flags & 0x80 != 0 {
        let n = 3 << ((flags & 7) + 1);
        let palette = data.get(i..i + n).ok_or_else(truncated)?;
        global = palette_needed(palette);
        i += n;
    }
    loop {
        match data.get(i) {
            Some(b'!') => {
                // Extension: label, then sub-blocks until an empty one.
                i += 2;
                loop {
                    let n = usize::from(*data.get(i).ok_or_else(truncated)?);
                    i += 1 + n;
                    if n == 0 {
                        break;
                    }
                }
            }
            Some(b',') => {
                let d = data.get(i + 1..i + 10).ok_or_else(truncated)?;
                let x1 = u32::from(u16::from_le_bytes([d[0], d[1]]))
                    + u32::from(u16::from_le_bytes([d[4], d[5]]));
                let y1 = u32::from(u16::from_le_bytes([d[2], d[3]]))
                    + u32::from(u16::from_le_bytes([d[6], d[7]]));
                width = width.max(x1);
                height = height.max(y1);
                let local_flags = d[8];
                let palette = if local_flags & 0x80 != 0 {
                    let n = 3 << ((local_flags & 7) + 1);
                    let start = i + 10;
                    palette_needed(data.get(start..start + n).ok_or_else(truncated)?)
                } else {
                    global
                };
                return Ok(GifInfo { width, height, mode: if palette { "P" } else { "L" } });
            }
            Some(b';') | None => {
                return Err(HeaderError::Damaged("GIF without an image".to_owned()));
            }
            Some(b) => {
                return Err(HeaderError::Damaged(format!(
                    "damaged GIF header (block type {b:#04x})"
                )));
            }
        }
    }
}

/// BMP: the mode from the bit count, compression and palette (Pillow's rules).
fn bmp_mode(data: &[u8]) -> Result<&'static str, HeaderError> {
    let truncated = || HeaderError::Truncated("BMP header");
    let header_size = le32(data, 14).ok_or_else(truncated)? as usize;
    let (bits, compression, clr_used, entry_size) = if header_size == 12 {
        (le16(data, 24).ok_or_else(truncated)?, 0, 0, 3)
    } else {
        (
            le16(data, 28).ok_or_else(truncated)?,
            le32(data, 30).ok_or_else(truncated)?,
            le32(data, 46).ok_or_else(truncated)?,
            4,
        )
    };
    Ok(match bits {
        1 | 2 | 4 | 8 => {
            let colors = if clr_used == 0 { 1usize << bits } else { clr_used as usize };
            let start = 14 + header_size;
            let palette = data
                .get(start..start + colors * entry_size)
                .ok_or(HeaderError::Truncated("BMP palette"))?;
            let entry = |i: usize| &palette[i * entry_size..i * entry_size + 3];
            let grey_value = |i: usize| if bits == 1 { [0u8, 255][i.min(1)] } else { i as u8 };
            let indices = if bits == 1 { 2 } else { colors };
            let greyscale =
                (0..indices.min(colors)).all(|i| entry(i).iter().all(|&c| c == grey_value(i)));
            match (greyscale, colors) {
                (true, 2) => "1",
                (true, _) => "L",
                (false, _) => "P",
            }
        }
        16 | 24 => "RGB",
        32 => {
            // BITFIELDS (3) or ALPHABITFIELDS (6) with an alpha mask: BGRA; otherwise BGRX.
            let alpha_mask = if header_size >= 56 { le32(data, 14 + 52).unwrap_or(0) } else { 0 };
            if matches!(compression, 3 | 6) && alpha_mask != 0 { "RGBA" } else { "RGB" }
        }
        other => {
            return Err(HeaderError::Unsupported(format!("BMP with {other} bits per pixel")));
        }
    })
}

/// TIFF (and anything else read by the `image` crate): Pillow's mode for the color type.
fn tiff_mode(color: ExtendedColorType) -> Result<&'static str, HeaderError> {
    Ok(match color {
        ExtendedColorType::L1 => "1",
        ExtendedColorType::L8 => "L",
        ExtendedColorType::La8 => "LA",
        ExtendedColorType::L16 => "I;16",
        ExtendedColorType::Rgb8 | ExtendedColorType::Rgb16 => "RGB",
        ExtendedColorType::Rgba8 | ExtendedColorType::Rgba16 => "RGBA",
        ExtendedColorType::Cmyk8 => "CMYK",
        ExtendedColorType::Rgb32F => "RGB",
        ExtendedColorType::Rgba32F => "RGBA",
        other => return Err(HeaderError::Unsupported(format!("TIFF color type {other:?}"))),
    })
}

/// ICO: the largest image of the directory; PNG images keep their PNG mode, BMP images are
/// `RGBA` (Pillow adds the AND mask as alpha).
fn ico(data: &[u8]) -> Result<ImageMetadata, HeaderError> {
    let truncated = || HeaderError::Truncated("ICO header");
    let count = usize::from(le16(data, 4).ok_or_else(truncated)?);
    if count == 0 {
        return Err(HeaderError::Damaged("ICO without images".to_owned()));
    }
    let mut best: Option<(u64, u16, usize)> = None;
    for n in 0..count {
        let e = 6 + 16 * n;
        let entry = data.get(e..e + 16).ok_or_else(truncated)?;
        let side = |b: u8| if b == 0 { 256u64 } else { u64::from(b) };
        let square = side(entry[0]) * side(entry[1]);
        let bpp = u16::from_le_bytes([entry[6], entry[7]]);
        if best.is_none_or(|(s, b, _)| (square, bpp) > (s, b)) {
            best = Some((square, bpp, e));
        }
    }
    let (_, _, e) = best.expect("count > 0");
    let (w, h) = (data[e], data[e + 1]);
    let side = |b: u8| if b == 0 { 256u32 } else { u32::from(b) };
    let offset = le32(data, e + 12).ok_or_else(truncated)? as usize;
    let image =
        data.get(offset..).filter(|d| d.len() >= 8).ok_or(HeaderError::Truncated("ICO image"))?;
    let (width, height, mode) = if image.starts_with(b"\x89PNG") {
        let width = be32(image, 16).ok_or(HeaderError::Truncated("PNG header in ICO"))?;
        let height = be32(image, 20).ok_or(HeaderError::Truncated("PNG header in ICO"))?;
        (width, height, png_mode(image)?)
    } else {
        (side(w), side(h), "RGBA")
    };
    Ok(ImageMetadata { width, height, format: "ICO".to_owned(), mode: mode.to_owned() })
}

const JP2_SIGNATURE: &[u8] = &[0, 0, 0, 0x0c, b'j', b'P', b' ', b' ', 0x0d, 0x0a, 0x87, 0x0a];

/// JPEG 2000: the `ihdr` box of a JP2 file, or the `SIZ` marker of a raw codestream.
fn jpeg2000(data: &[u8]) -> Result<ImageMetadata, HeaderError> {
    let truncated = || HeaderError::Truncated("JPEG 2000 header");
    let (width, height, components, depth) = if data.starts_with(JP2_SIGNATURE) {
        let ihdr = find_box(data, 12, b"jp2h")
            .and_then(|(start, end)| find_box(&data[..end], start, b"ihdr"))
            .ok_or_else(|| {
                HeaderError::Damaged(
                    "JPEG 2000 file without an image header (jp2h/ihdr)".to_owned(),
                )
            })?
            .0;
        let height = be32(data, ihdr).ok_or_else(truncated)?;
        let width = be32(data, ihdr + 4).ok_or_else(truncated)?;
        let nc = be16(data, ihdr + 8).ok_or_else(truncated)?;
        let bpc = *data.get(ihdr + 10).ok_or_else(truncated)?;
        (width, height, nc, (bpc & 0x7f) + 1)
    } else {
        // SIZ follows SOC: Lsiz, Rsiz, Xsiz, Ysiz, XOsiz, YOsiz, 4 tile fields, Csiz, Ssiz...
        let x = be32(data, 8).ok_or_else(truncated)?;
        let y = be32(data, 12).ok_or_else(truncated)?;
        let xo = be32(data, 16).ok_or_else(truncated)?;
        let yo = be32(data, 20).ok_or_else(truncated)?;
        let csiz = be16(data, 40).ok_or_else(truncated)?;
        let ssiz = *data.get(42).ok_or_else(truncated)?;
        let damaged = || HeaderError::Damaged("damaged JPEG 2000 size".to_owned());
        let width = x.checked_sub(xo).ok_or_else(damaged)?;
        let height = y.checked_sub(yo).ok_or_else(damaged)?;
        (width, height, csiz, (ssiz & 0x7f) + 1)
    };
    let mode = match (components, depth) {
        (1, d) if d > 8 => "I;16",
        (1, _) => "L",
        (2, _) => "LA",
        (3, _) => "RGB",
        (4, _) => "RGBA",
        (n, _) => {
            return Err(HeaderError::Unsupported(format!("JPEG 2000 with {n} components")));
        }
    };
    Ok(ImageMetadata { width, height, format: "JPEG2000".to_owned(), mode: mode.to_owned() })
}

/// Finds the box of type `kind` among the boxes starting at `start`; returns the range of its
/// content.
fn find_box(data: &[u8], mut start: usize, kind: &[u8; 4]) -> Option<(usize, usize)> {
    while start + 8 <= data.len() {
        let len = be32(data, start)? as usize;
        let (header, len) = match len {
            0 => (8, data.len() - start),
            1 => (
                16,
                usize::try_from(u64::from_be_bytes(
                    data.get(start + 8..start + 16)?.try_into().ok()?,
                ))
                .ok()?,
            ),
            n => (8, n),
        };
        if len < header {
            return None;
        }
        let end = start.checked_add(len)?.min(data.len());
        if &data[start + 4..start + 8] == kind {
            return Some((start + header, end));
        }
        start = end;
    }
    None
}
