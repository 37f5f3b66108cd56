//! JPEG parts through libjpeg-turbo's TurboJPEG API (the `turbojpeg` feature): Pillow's pixels.
//!
//! Pillow decodes JPEG with libjpeg-turbo using the accurate integer IDCT and fancy (smooth)
//! chroma upsampling, which are also TurboJPEG's decompression defaults, so the pixels here are
//! Pillow's exactly (checked against Pillow's digests in `tests/pillow_jpeg.rs`). What Pillow
//! does on top of libjpeg is reproduced here:
//!
//! - modes: a 1-component JPEG is `L`, 3 components `RGB`, 4 components `CMYK` (stored inverted,
//!   the Adobe convention, which Pillow assumes whether or not the Adobe marker is there);
//!   `convert("L")` of a color image is [`pil_luma`] of its RGB, `CMYK` to RGB is
//!   [`cmyk_to_rgb`], RGBA adds an opaque alpha;
//! - corrupt data is decoded as far as libjpeg gets (libjpeg warns, Pillow ignores warnings), but
//!   data that ends before the end-of-image marker is an error ("image file is truncated");
//! - images of more than [`MAX_PIXELS`] pixels are refused (Pillow's decompression-bomb error).
//!
//! JPEGs this module does not take (no frame header before the first scan, lossless or
//! hierarchical coding, other than 8 bits, 2 components, ...) are left to the `image` crate.

use std::cell::Cell;

use turbojpeg::{Decompressor, Image, PixelFormat};

use super::image::pil_luma;

/// Pillow refuses to open images of more than twice `Image.MAX_IMAGE_PIXELS` (89,478,485)
/// pixels (`DecompressionBombError`).
pub(super) const MAX_PIXELS: u64 = 2 * 89_478_485;

/// libjpeg's warning when the data ends before the end-of-image marker (`JWRN_JPEG_EOF`).
const PREMATURE_END: &str = "Premature end of JPEG file";

/// The starts of libjpeg's other warning messages (`JWRN_*` in `jerror.h`): the image was decoded
/// (corrupt parts filled in), as Pillow accepts it. Any other message is an error.
const WARNINGS: &[&str] = &[
    "Corrupt JPEG data",
    "Unknown Adobe color transform code",
    "Inconsistent progression sequence for component",
    "Warning: unknown JFIF revision number",
    "Invalid SOS parameters for sequential JPEG",
    "Application transferred too many scanlines",
];

/// A decoded JPEG: `u8` HWC pixels with the channels asked for.
#[derive(Debug)]
pub(super) struct Pixels {
    /// Columns.
    pub(super) width: usize,
    /// Rows.
    pub(super) height: usize,
    /// `height * width * channels` bytes.
    pub(super) pixels: Vec<u8>,
}

thread_local! {
    /// One decompressor per thread, reused (creating one allocates libjpeg's state); dropped after
    /// a failed call so that no later image inherits its state.
    static DECOMPRESSOR: Cell<Option<Decompressor>> = const { Cell::new(None) };
}

/// Decodes JPEG `data` to HWC bytes with `channels` channels (1: Pillow's `L`, 3: `RGB`,
/// 4: `RGBA`). `Ok(None)`: a JPEG this decoder does not take (see the module documentation).
pub(super) fn decode_jpeg(data: &[u8], channels: usize) -> Result<Option<Pixels>, String> {
    let Some(frame) = read_frame(data) else {
        return Ok(None);
    };
    let (width, height) = (usize::from(frame.width), usize::from(frame.height));
    let pixels = u64::from(frame.width) * u64::from(frame.height);
    if pixels > MAX_PIXELS {
        return Err(format!(
            "jpg image of {width}x{height} pixels is over the limit of {MAX_PIXELS} pixels \
             (Pillow's decompression bomb check)"
        ));
    }
    let format = match (frame.components, channels) {
        (1, 1) => PixelFormat::GRAY,
        (4, _) => PixelFormat::CMYK,
        (_, 4) => PixelFormat::RGBA,
        _ => PixelFormat::RGB,
    };
    let decoded = decompress(data, &frame, format)?;
    let pixels = match (format, channels) {
        (PixelFormat::CMYK, _) => {
            let rgb = cmyk_to_rgb(&decoded);
            match channels {
                1 => pil_luma(&rgb),
                3 => rgb,
                _ => rgb.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect(),
            }
        }
        (PixelFormat::RGB, 1) => pil_luma(&decoded),
        _ => decoded,
    };
    Ok(Some(Pixels { width, height, pixels }))
}

/// Decompresses the whole image into a new buffer of `format` pixels.
fn decompress(data: &[u8], frame: &Frame, format: PixelFormat) -> Result<Vec<u8>, String> {
    let (width, height) = (usize::from(frame.width), usize::from(frame.height));
    let pitch = width * format.size();
    let mut pixels = vec![0u8; pitch * height];
    let mut decompressor = match DECOMPRESSOR.take() {
        Some(d) => d,
        None => Decompressor::new()
            .map_err(|e| format!("cannot start the jpeg decoder: {}", message(&e)))?,
    };
    // The frame header gives the size libjpeg finds too, so the image is decoded unscaled.
    let output = Image { pixels: &mut pixels[..], width, pitch, height, format };
    match decompressor.decompress(data, output) {
        Ok(()) => {
            DECOMPRESSOR.set(Some(decompressor));
            Ok(pixels)
        }
        // TurboJPEG 2 fails on warnings too, with the image decoded (corrupt parts filled in).
        Err(e) => {
            let msg = message(&e);
            match failure(&msg, data, frame.scan) {
                Failure::Warning => Ok(pixels),
                Failure::Truncated => Err(format!(
                    "invalid jpg image: the data ends before the end of the image \
                     ({} bytes; libjpeg: {msg})",
                    data.len()
                )),
                Failure::Error => Err(format!("invalid jpg image: {msg}")),
            }
        }
    }
}

/// What a failed TurboJPEG call means for Pillow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// libjpeg only warned: the image is decoded and Pillow accepts it.
    Warning,
    /// The data ends before the end-of-image marker: Pillow says the file is truncated.
    Truncated,
    /// libjpeg gave up.
    Error,
}

/// Classifies TurboJPEG's message. TurboJPEG 2 reports warnings as failures too, with the first
/// warning's message, or the error's message when libjpeg gave up after a warning; a truncation
/// after another warning is found by looking for the end-of-image marker after the first scan
/// header (`scan`: where it starts).
fn failure(message: &str, data: &[u8], scan: usize) -> Failure {
    if message == PREMATURE_END {
        Failure::Truncated
    } else if WARNINGS.iter().any(|w| message.starts_with(w)) {
        let after_scan = data.get(scan..).unwrap_or_default();
        if after_scan.windows(2).any(|w| w == [0xff, 0xd9]) {
            Failure::Warning
        } else {
            Failure::Truncated
        }
    } else {
        Failure::Error
    }
}

/// The message of a TurboJPEG error (the library's own text when it has one).
fn message(e: &turbojpeg::Error) -> String {
    match e {
        turbojpeg::Error::TurboJpegError(msg) => msg.clone(),
        other => other.to_string(),
    }
}

/// Pillow's CMYK to RGB for the inverted (Adobe) samples libjpeg returns: with `c`, `m`, `y`,
/// `k` the uninverted values and `nk = 255 - k`, each channel is
/// `nk - round(c * nk / 255)`, the rounding being `((t >> 8) + t) >> 8` of `t = c * nk + 128`.
pub(super) fn cmyk_to_rgb(inverted: &[u8]) -> Vec<u8> {
    let mut rgb = Vec::with_capacity(inverted.len() / 4 * 3);
    for p in inverted.chunks_exact(4) {
        let nk = u32::from(p[3]);
        for &v in &p[..3] {
            let t = (255 - u32::from(v)) * nk + 128;
            // At most nk, so the difference is in 0..=255.
            rgb.push((nk - (((t >> 8) + t) >> 8)) as u8);
        }
    }
    rgb
}

/// The frame header of a JPEG libjpeg-turbo decodes here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    width: u16,
    height: u16,
    /// 1, 3 or 4.
    components: u8,
    /// Offset of the first scan header (SOS marker).
    scan: usize,
}

/// Walks the marker segments from the start of image to the first scan as libjpeg does (bytes
/// before a marker and fill bytes skipped, standalone markers without a length) and returns the
/// frame header, if it is one libjpeg-turbo decodes here: baseline, extended or progressive,
/// Huffman or arithmetic coded, 8 bits, a height in the header, 1, 3 or 4 components.
fn read_frame(data: &[u8]) -> Option<Frame> {
    if !data.starts_with(&[0xff, 0xd8]) {
        return None;
    }
    let mut pos = 2;
    let mut frame = None;
    loop {
        while *data.get(pos)? != 0xff {
            pos += 1;
        }
        while *data.get(pos)? == 0xff {
            pos += 1;
        }
        let marker = data[pos];
        match marker {
            // A stuffed zero (not a marker), TEM and RSTn have no segment.
            0x00 | 0x01 | 0xd0..=0xd7 => {
                pos += 1;
                continue;
            }
            0xda => return frame.map(|f| Frame { scan: pos - 1, ..f }),
            // A second SOI, or EOI before any scan.
            0xd8 | 0xd9 => return None,
            _ => {}
        }
        let length = usize::from(u16::from_be_bytes([*data.get(pos + 1)?, *data.get(pos + 2)?]));
        if length < 2 {
            return None;
        }
        match marker {
            0xc0 | 0xc1 | 0xc2 | 0xc9 | 0xca => {
                let header = data.get(pos + 3..pos + 9)?;
                let precision = header[0];
                let height = u16::from_be_bytes([header[1], header[2]]);
                let width = u16::from_be_bytes([header[3], header[4]]);
                let components = header[5];
                let supported = frame.is_none()
                    && precision == 8
                    && height > 0
                    && width > 0
                    && matches!(components, 1 | 3 | 4);
                if !supported {
                    return None;
                }
                frame = Some(Frame { width, height, components, scan: 0 });
            }
            // Lossless, hierarchical and the other frame types.
            0xc3 | 0xc5..=0xc7 | 0xcb | 0xcd..=0xcf => return None,
            _ => {}
        }
        pos += 1 + length;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(marker: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0xff, marker];
        out.extend_from_slice(&u16::try_from(payload.len() + 2).unwrap().to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// SOI, an APP0, the given frame segment, a DHT, SOS and a few scan bytes, EOI.
    fn jpeg_with(sof: &[u8]) -> Vec<u8> {
        let mut out = vec![0xff, 0xd8];
        out.extend(segment(0xe0, b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"));
        out.extend_from_slice(sof);
        out.extend(segment(0xc4, &[0x00; 17]));
        out.extend(segment(0xda, &[1, 1, 0, 0, 63, 0]));
        out.extend_from_slice(&[0x12, 0xff, 0x00, 0x34, 0xff, 0xd9]);
        out
    }

    fn sof(marker: u8, precision: u8, height: u16, width: u16, components: u8) -> Vec<u8> {
        let mut payload = vec![precision];
        payload.extend_from_slice(&height.to_be_bytes());
        payload.extend_from_slice(&width.to_be_bytes());
        payload.push(components);
        for c in 0..components {
            payload.extend_from_slice(&[c + 1, 0x11, 0]);
        }
        segment(marker, &payload)
    }

    #[test]
    fn the_frame_header_is_found_after_other_segments() {
        for marker in [0xc0, 0xc1, 0xc2, 0xc9, 0xca] {
            let data = jpeg_with(&sof(marker, 8, 23, 37, 3));
            let frame = read_frame(&data).unwrap();
            assert_eq!((frame.width, frame.height, frame.components), (37, 23, 3), "{marker:x}");
            assert_eq!(&data[frame.scan..frame.scan + 2], [0xff, 0xda]);
        }
    }

    #[test]
    fn garbage_and_fill_bytes_before_markers_are_skipped() {
        let mut data = vec![0xff, 0xd8, 0x00, 0x17, 0xff, 0xff, 0xff];
        data.extend(&sof(0xc0, 8, 2, 3, 1)[1..]);
        data.extend_from_slice(&[0xff, 0xd0, 0xff, 0x01]);
        data.extend(segment(0xda, &[1, 1, 0, 0, 63, 0]));
        let frame = read_frame(&data).unwrap();
        assert_eq!((frame.width, frame.height, frame.components), (3, 2, 1));
    }

    #[test]
    fn frames_this_decoder_does_not_take_are_left_to_the_image_crate() {
        for bad in [
            sof(0xc3, 8, 2, 2, 3),  // lossless
            sof(0xc5, 8, 2, 2, 3),  // hierarchical
            sof(0xc0, 12, 2, 2, 3), // 12 bits
            sof(0xc0, 8, 0, 2, 3),  // height in a DNL marker
            sof(0xc0, 8, 2, 0, 3),
            sof(0xc0, 8, 2, 2, 2),
        ] {
            assert_eq!(read_frame(&jpeg_with(&bad)), None, "{bad:x?}");
        }
        let two_frames = [sof(0xc0, 8, 2, 2, 3), sof(0xc0, 8, 2, 2, 3)].concat();
        assert_eq!(read_frame(&jpeg_with(&two_frames)), None);
        // No frame before the scan, no scan, cut inside a segment, not a JPEG.
        assert_eq!(read_frame(&jpeg_with(&[])), None);
        let data = jpeg_with(&sof(0xc0, 8, 2, 2, 3));
        let scan = read_frame(&data).unwrap().scan;
        for cut in 0..scan {
            assert_eq!(read_frame(&data[..cut]), None, "{cut}");
        }
        assert_eq!(read_frame(b"\x89PNG\r\n\x1a\n"), None);
    }

    #[test]
    fn warnings_are_accepted_unless_the_data_is_cut() {
        let data = jpeg_with(&sof(0xc0, 8, 2, 2, 3));
        let scan = read_frame(&data).unwrap().scan;
        let bad_huffman = "Corrupt JPEG data: bad Huffman code";
        assert_eq!(failure(bad_huffman, &data, scan), Failure::Warning);
        assert_eq!(failure(bad_huffman, &data[..data.len() - 2], scan), Failure::Truncated);
        assert_eq!(failure(PREMATURE_END, &data, scan), Failure::Truncated);
        for fatal in ["Bogus marker length", "tjDecompress2(): Invalid argument", ""] {
            assert_eq!(failure(fatal, &data, scan), Failure::Error, "{fatal}");
        }
    }

    /// Pillow's `cmyk2rgb` on the uninverted values, written out with a division.
    fn pillow_cmyk(c: u8, k: u8) -> u8 {
        let nk = 255 - i32::from(k);
        let scaled = (f64::from(c) * f64::from(nk) / 255.0).round() as i32;
        (nk - scaled).clamp(0, 255) as u8
    }

    #[test]
    fn cmyk_conversion_is_pillows() {
        for k in 0..=255u8 {
            for c in 0..=255u8 {
                let rgb = cmyk_to_rgb(&[255 - c, 255 - c, 255 - c, 255 - k]);
                assert_eq!(rgb, [pillow_cmyk(c, k); 3], "c={c} k={k}");
            }
        }
    }

    #[test]
    fn oversized_images_are_refused_before_decoding() {
        let data = jpeg_with(&sof(0xc0, 8, 65535, 65535, 3));
        let err = decode_jpeg(&data, 3).unwrap_err();
        assert!(err.contains("65535x65535") && err.contains("decompression bomb"), "{err}");
    }
}
