//! JPEG parts through libjpeg (the libjpeg-turbo code that `mozjpeg-sys` builds from source with
//! the C compiler): Pillow's pixels.
//!
//! Pillow decodes JPEG with libjpeg-turbo, with libjpeg's defaults: the accurate integer IDCT
//! (`JDCT_ISLOW`) and fancy (smooth) chroma upsampling. The same decoder runs here with the same
//! settings, so the pixels are Pillow's exactly (checked against Pillow's digests in
//! `tests/pillow_jpeg.rs`). What Pillow does on top of libjpeg is reproduced here:
//!
//! - modes: a 1-component JPEG is `L`, 3 components `RGB`, 4 components `CMYK` (stored inverted,
//!   the Adobe convention, which Pillow assumes whether or not the Adobe marker is there; YCCK is
//!   converted to CMYK by libjpeg); `convert("L")` of a color image is [`pil_luma`] of its RGB,
//!   `CMYK` to RGB is [`cmyk_to_rgb`], RGBA adds an opaque alpha;
//! - corrupt data is decoded as far as libjpeg gets (libjpeg warns, Pillow ignores warnings), but
//!   data that ends before the last row is decoded is an error ("image file is truncated": Pillow
//!   feeds libjpeg a suspending source, which waits for more data where the memory source here
//!   warns and pads); data that ends after the last row (no end-of-image marker) is accepted;
//! - images over the pixel limit are refused after the header is read, before any pixel buffer
//!   is allocated (Pillow's decompression-bomb check, see [`super::DecodeLimits`]).
//!
//! libjpeg reports a fatal error through `error_exit`, which must not return. Here it unwinds
//! (the C code is compiled with unwind tables, the `unwinding` feature of `mozjpeg-sys`) with
//! [`std::panic::resume_unwind`], which skips the panic hook, and [`decode_jpeg`] catches it.

use std::{
    ffi::{c_int, c_ulong},
    panic::{AssertUnwindSafe, catch_unwind, resume_unwind},
};

use mozjpeg_sys::{
    J_COLOR_SPACE, JDIMENSION, JSAMPROW_MUT, JWRN_JPEG_EOF, jpeg_common_struct,
    jpeg_create_decompress, jpeg_decompress_struct, jpeg_destroy_decompress, jpeg_error_mgr,
    jpeg_finish_decompress, jpeg_mem_src, jpeg_read_header, jpeg_read_scanlines,
    jpeg_start_decompress, jpeg_std_error,
};

use super::{DecodeError, image::pil_luma};

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

/// The payload `error_exit` unwinds with: libjpeg's message.
struct Fatal(String);

/// What the error manager saw, reached through `client_data`.
#[derive(Debug, Default)]
struct Seen {
    /// libjpeg wanted data past the end of the buffer (`JWRN_JPEG_EOF`).
    end_of_data: bool,
}

/// libjpeg's message for the error manager's current code.
///
/// # Safety
/// `cinfo.err` must point to an initialized error manager.
unsafe fn message(cinfo: &mut jpeg_common_struct) -> String {
    let buffer = [0u8; 80];
    // SAFETY: the caller guarantees `err`; `format_message` is set by `jpeg_std_error` and writes
    // a NUL-terminated string of at most 80 bytes into the buffer.
    unsafe {
        if let Some(format) = (*cinfo.err).format_message {
            format(cinfo, &buffer);
        }
    }
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

unsafe extern "C-unwind" fn error_exit(cinfo: &mut jpeg_common_struct) {
    // SAFETY: libjpeg calls this with the error manager set up by `decode_jpeg`.
    let msg = unsafe { message(cinfo) };
    resume_unwind(Box::new(Fatal(msg)));
}

unsafe extern "C-unwind" fn emit_message(cinfo: &mut jpeg_common_struct, level: c_int) {
    if level >= 0 {
        return; // trace messages
    }
    // SAFETY: `err` and `client_data` are set by `decode_jpeg` for the whole call; `Seen` lives
    // on its stack.
    unsafe {
        (*cinfo.err).num_warnings += 1;
        if (*cinfo.err).msg_code == JWRN_JPEG_EOF as c_int {
            (*cinfo.client_data.cast::<Seen>()).end_of_data = true;
        }
    }
}

/// The libjpeg state of one call; destroyed on drop, also after an unwind.
struct Session {
    cinfo: Box<jpeg_decompress_struct>,
    _err: Box<jpeg_error_mgr>,
    seen: Box<Seen>,
}

impl Session {
    fn new() -> Session {
        // SAFETY: both structs are plain C data for which all-zero bytes are a valid start (the
        // libjpeg functions below fill them in).
        let mut err: Box<jpeg_error_mgr> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: as above.
        let mut cinfo: Box<jpeg_decompress_struct> = Box::new(unsafe { std::mem::zeroed() });
        let mut seen = Box::<Seen>::default();
        // SAFETY: `jpeg_std_error` initializes the error manager; the boxes do not move while
        // `cinfo` points to them, and they are freed only after `jpeg_destroy_decompress`.
        unsafe {
            jpeg_std_error(&mut err);
            err.error_exit = Some(error_exit);
            err.emit_message = Some(emit_message);
            cinfo.common.err = &raw mut *err;
            jpeg_create_decompress(&raw mut *cinfo);
            cinfo.common.client_data = (&raw mut *seen).cast();
        }
        Session { cinfo, _err: err, seen }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: created by `jpeg_create_decompress`; destroying is valid in any state, also
        // after an error unwound out of libjpeg.
        unsafe { jpeg_destroy_decompress(&mut self.cinfo) };
    }
}

/// Decodes JPEG `data` to HWC bytes with `channels` channels (1: Pillow's `L`, 3: `RGB`,
/// 4: `RGBA`), refusing images of more than `max_pixels` pixels.
pub(super) fn decode_jpeg(
    data: &[u8],
    channels: usize,
    max_pixels: Option<u64>,
) -> Result<Pixels, DecodeError> {
    let mut session = Session::new();
    match catch_unwind(AssertUnwindSafe(|| decode_in(&mut session, data, channels, max_pixels))) {
        Ok(result) => result,
        Err(payload) => match payload.downcast::<Fatal>() {
            Ok(fatal) => Err(DecodeError::Invalid(format!("invalid jpg image: {}", fatal.0))),
            Err(other) => resume_unwind(other),
        },
    }
}

fn decode_in(
    session: &mut Session,
    data: &[u8],
    channels: usize,
    max_pixels: Option<u64>,
) -> Result<Pixels, DecodeError> {
    let cinfo = &mut *session.cinfo;
    // SAFETY: `data` outlives the session's use of it (the session is dropped by the caller,
    // after this returns); the calls follow libjpeg's sequence; errors unwind to the caller.
    unsafe {
        jpeg_mem_src(cinfo, data.as_ptr(), data.len() as c_ulong);
        jpeg_read_header(cinfo, 1);
    }
    let (width, height) = (cinfo.image_width as usize, cinfo.image_height as usize);
    super::image::check_pixels("jpg", width as u64, height as u64, max_pixels)?;
    let (space, size) = match (cinfo.num_components, channels) {
        (1, 1) => (J_COLOR_SPACE::JCS_GRAYSCALE, 1),
        (4, _) => (J_COLOR_SPACE::JCS_CMYK, 4),
        (_, 4) => (J_COLOR_SPACE::JCS_EXT_RGBA, 4),
        _ => (J_COLOR_SPACE::JCS_RGB, 3),
    };
    cinfo.out_color_space = space;
    // SAFETY: as above.
    unsafe { jpeg_start_decompress(cinfo) };
    let (out_w, out_h) = (cinfo.output_width as usize, cinfo.output_height as usize);
    let pitch = out_w * size;
    let mut decoded = vec![0u8; pitch * out_h];
    while (cinfo.output_scanline as usize) < out_h {
        let row = cinfo.output_scanline as usize;
        let mut rows: [JSAMPROW_MUT; 1] = [decoded[row * pitch..].as_mut_ptr()];
        // SAFETY: the row pointer has `pitch` writable bytes, libjpeg writes one row of
        // `output_components` samples per pixel, which is `size`.
        let read = unsafe { jpeg_read_scanlines(cinfo, rows.as_mut_ptr(), 1 as JDIMENSION) };
        if read == 0 {
            break;
        }
    }
    if session.seen.end_of_data || (cinfo.output_scanline as usize) < out_h {
        return Err(DecodeError::Invalid(format!(
            "invalid jpg image: image file is truncated (the data, {} bytes, ends before the \
             last row is decoded)",
            data.len()
        )));
    }
    // Pillow reads no further once all rows are out; libjpeg's end-of-data warning here (no
    // end-of-image marker) does not matter.
    // SAFETY: as above.
    unsafe { jpeg_finish_decompress(cinfo) };
    let pixels = match (space, channels) {
        (J_COLOR_SPACE::JCS_CMYK, _) => {
            let rgb = cmyk_to_rgb(&decoded);
            match channels {
                1 => pil_luma(&rgb),
                3 => rgb,
                _ => rgb.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect(),
            }
        }
        (J_COLOR_SPACE::JCS_RGB, 1) => pil_luma(&decoded),
        _ => decoded,
    };
    Ok(Pixels { width: out_w, height: out_h, pixels })
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

#[cfg(test)]
mod tests {
    use super::*;

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

    fn segment(marker: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0xff, marker];
        out.extend_from_slice(&u16::try_from(payload.len() + 2).unwrap().to_be_bytes());
        out.extend_from_slice(payload);
        out
    }

    /// A JPEG header declaring `width` x `height` pixels in 3 components, with no scan data.
    fn header_only(width: u16, height: u16) -> Vec<u8> {
        let mut payload = vec![8];
        payload.extend_from_slice(&height.to_be_bytes());
        payload.extend_from_slice(&width.to_be_bytes());
        payload.push(3);
        for c in 0..3 {
            payload.extend_from_slice(&[c + 1, 0x11, 0]);
        }
        let mut out = vec![0xff, 0xd8];
        out.extend(segment(0xdb, &[[0u8].as_slice(), &[1; 64]].concat()));
        out.extend(segment(0xc0, &payload));
        out.extend(segment(0xc4, &[[0u8].as_slice(), &[0; 15], &[1], &[0]].concat()));
        out.extend(segment(0xda, &[3, 1, 0, 2, 0, 3, 0, 0, 63, 0]));
        out
    }

    #[test]
    fn oversized_images_are_refused_before_decoding() {
        let err = decode_jpeg(&header_only(65000, 65000), 3, Some(89_478_485)).unwrap_err();
        assert!(matches!(err, DecodeError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("65000x65000"), "{err}");
    }

    #[test]
    fn fatal_errors_are_errors_and_the_next_image_decodes() {
        for bad in [&b"\xff\xd8\xff\xd9"[..], b"\xff\xd8", b"not a jpeg", &header_only(3, 0)] {
            let err = decode_jpeg(bad, 3, None).unwrap_err();
            assert!(matches!(err, DecodeError::Invalid(_)), "{err}");
            assert!(err.to_string().starts_with("invalid jpg image: "), "{err}");
        }
        // A header with no entropy-coded data ends before the first row.
        let err = decode_jpeg(&header_only(3, 2), 3, None).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
