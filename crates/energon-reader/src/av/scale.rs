//! Decoded frames to RGB24 as PyAV's `VideoFrame.reformat` converts them through FFmpeg's
//! `sws_scale_frame`: bilinear, with the YUV matrix, range and chroma siting the frame is tagged
//! with. Older FFmpeg versions' `sws_getContext` assumes BT.601 and centred chroma instead, which
//! moves pixels by up to 25 levels; here every version gives the reference's pixels.

use std::{cell::RefCell, ffi::CStr, ptr};

use ffmpeg::{ffi, format::Pixel, frame};
use ffmpeg_next as ffmpeg;

use super::{AvFault, container::Msg};

/// What a scaling context is made for: source format and size, YUV matrix, full range, chroma
/// siting (1/256 of a luma sample; None: FFmpeg's default), and the output size.
type Key = (Pixel, u32, u32, i32, bool, Option<(i64, i64)>, u32, u32);

/// A scaling context with what it was made for, and the frame it converts into (allocated once,
/// reused for every frame of the same kind).
struct Scaler {
    ctx: *mut ffi::SwsContext,
    key: Key,
    dst: frame::Video,
}

impl Drop for Scaler {
    fn drop(&mut self) {
        // SAFETY: a context from `sws_alloc_context`, freed once.
        unsafe { ffi::sws_freeContext(self.ctx) };
    }
}

thread_local! {
    /// The scaling context this thread used last: clip requests on videos of one size (every
    /// request opens its media afresh) set it up once rather than once per request.
    static SCALER: RefCell<Option<Scaler>> = const { RefCell::new(None) };
}

/// The frame's tags as `sws_scale_frame` reads them: its colour space indexes FFmpeg's
/// coefficient table (BT.709, FCC, BT.601, SMPTE 240M, BT.2020; anything else is BT.601); the
/// `yuvj` formats and frames tagged JPEG range are full range; a chroma location the decoder set
/// (H.264 and MPEG-4 set left, VP9 sets none) gives the chroma sample positions.
fn key(f: &frame::Video, w: u32, h: u32) -> Key {
    // SAFETY: a valid decoded frame.
    let (space, range, loc) = unsafe {
        let raw = &*f.as_ptr();
        (raw.colorspace as i32, raw.color_range, raw.chroma_location as i64)
    };
    let full = range == ffi::AVColorRange::AVCOL_RANGE_JPEG
        || matches!(
            f.format(),
            Pixel::YUVJ420P | Pixel::YUVJ422P | Pixel::YUVJ444P | Pixel::YUVJ440P | Pixel::YUVJ411P
        );
    // AVCHROMA_LOC_LEFT (1) .. BOTTOM (6), as `av_chroma_location_enum_to_pos` places them.
    let siting = (1..=6).contains(&loc).then(|| {
        let pos = loc - 1;
        ((pos & 1) * 128, ((pos >> 1) ^ i64::from(pos < 4)) * 128)
    });
    (f.format(), f.width(), f.height(), space, full, siting, w, h)
}

fn set(ctx: *mut ffi::SwsContext, name: &CStr, value: i64) -> Result<(), Msg> {
    // SAFETY: a valid context and a NUL-terminated option name.
    let r = unsafe { ffi::av_opt_set_int(ctx.cast(), name.as_ptr(), value, 0) };
    if r < 0 {
        return Err(AvFault::Convert(format!("scaler option {name:?} refused")));
    }
    Ok(())
}

impl Scaler {
    fn new(key: Key) -> Result<Scaler, Msg> {
        let (format, sw, sh, space, full, siting, w, h) = key;
        // SAFETY: allocation only; freed by `Drop` from here on.
        let ctx = unsafe { ffi::sws_alloc_context() };
        if ctx.is_null() {
            return Err(AvFault::Convert("out of memory".to_owned()));
        }
        let scaler = Scaler { ctx, key, dst: frame::Video::new(Pixel::RGB24, w, h) };
        let src_format: ffi::AVPixelFormat = format.into();
        let dst_format: ffi::AVPixelFormat = Pixel::RGB24.into();
        let mut options = vec![
            (c"srcw", i64::from(sw)),
            (c"srch", i64::from(sh)),
            (c"src_format", src_format as i64),
            (c"dstw", i64::from(w)),
            (c"dsth", i64::from(h)),
            (c"dst_format", dst_format as i64),
            (c"sws_flags", i64::from(ffi::SWS_BILINEAR)),
            (c"src_range", i64::from(full)),
            (c"dst_range", 1),
        ];
        if let Some((x, y)) = siting {
            options.extend([(c"src_h_chr_pos", x), (c"src_v_chr_pos", y)]);
        }
        for (name, value) in options {
            set(ctx, name, value)?;
        }
        // SAFETY: a configured context; the coefficient table is FFmpeg's static one (the index
        // is clamped by `sws_getCoefficients`).
        unsafe {
            if ffi::sws_init_context(ctx, ptr::null_mut(), ptr::null_mut()) < 0 {
                return Err(AvFault::Convert(format!("from {format:?}")));
            }
            let table = ffi::sws_getCoefficients(space);
            // Refused (-1) only for sources without a YUV matrix (RGB, gray), where none applies.
            ffi::sws_setColorspaceDetails(
                ctx,
                table,
                i32::from(full),
                table,
                1,
                0,
                1 << 16,
                1 << 16,
            );
        }
        Ok(scaler)
    }

    fn run(&mut self, f: &frame::Video) -> Result<(), Msg> {
        // SAFETY: the context was made for this frame's format and size (the key), and the
        // destination frame for its output size.
        let r = unsafe {
            let src = &*f.as_ptr();
            let dst = &mut *self.dst.as_mut_ptr();
            ffi::sws_scale(
                self.ctx,
                src.data.as_ptr().cast(),
                src.linesize.as_ptr(),
                0,
                src.height,
                dst.data.as_ptr(),
                dst.linesize.as_ptr(),
            )
        };
        if r < 0 {
            return Err(AvFault::Convert(ffmpeg::Error::from(r).to_string()));
        }
        Ok(())
    }
}

/// Converts a frame to RGB24 at `w` x `h` and appends its rows to `out` without padding.
pub(super) fn rgb(f: &frame::Video, w: u32, h: u32, out: &mut Vec<u8>) -> Result<(), Msg> {
    SCALER.with_borrow_mut(|slot| {
        let key = key(f, w, h);
        if slot.as_ref().is_none_or(|s| s.key != key) {
            *slot = None;
            *slot = Some(Scaler::new(key)?);
        }
        let Some(scaler) = slot.as_mut() else { unreachable!() };
        scaler.run(f)?;
        let stride = scaler.dst.stride(0);
        let row = w as usize * 3;
        let plane = scaler.dst.data(0);
        for y in 0..h as usize {
            out.extend_from_slice(&plane[y * stride..y * stride + row]);
        }
        Ok(())
    })
}
