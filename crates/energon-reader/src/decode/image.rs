//! Image parts: decoded (JPEG with libjpeg, the other formats with the `image` crate) into the
//! layouts the reference's decoder offers, within Pillow's pixel limit.

use std::{fmt, io::Cursor, str::FromStr};

use image::{DynamicImage, ImageFormat, ImageReader};

use super::{
    DecodeError, DecodeLimits, Limit,
    tensor::{Tensor, TensorData},
};

/// How image parts are decoded (the reference's `image_decode` names).
///
/// The reference defaults to `torchrgb` (float CHW in `[0, 1]`); energon-rs defaults to
/// [`ImageDecode::Rgb8`] (`u8` HWC), the natural form for Rust and numpy consumers; ask for
/// [`ImageDecode::TorchRgb`] to get the reference's form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ImageDecode {
    /// `l8`: `u8` HW grayscale.
    L8,
    /// `rgb8`: `u8` HWC RGB.
    #[default]
    Rgb8,
    /// `rgba8`: `u8` HWC RGBA.
    Rgba8,
    /// `l`: `f32` HW grayscale in `[0, 1]`.
    L,
    /// `rgb`: `f32` HWC RGB in `[0, 1]`.
    Rgb,
    /// `rgba`: `f32` HWC RGBA in `[0, 1]`.
    Rgba,
    /// `torchl8`: `u8` 1HW grayscale.
    TorchL8,
    /// `torchrgb8`: `u8` CHW RGB.
    TorchRgb8,
    /// `torchrgba8`: `u8` CHW RGBA.
    TorchRgba8,
    /// `torchl`: `f32` 1HW grayscale in `[0, 1]`.
    TorchL,
    /// `torchrgb` (also `torch`): `f32` CHW RGB in `[0, 1]`, the reference's default.
    TorchRgb,
    /// `torchrgba`: `f32` CHW RGBA in `[0, 1]`.
    TorchRgba,
    /// Images are not decoded: parts stay raw bytes.
    Raw,
}

impl ImageDecode {
    /// Every mode with its name, in the order of the reference's documentation.
    pub const ALL: [(&'static str, ImageDecode); 13] = [
        ("l8", ImageDecode::L8),
        ("rgb8", ImageDecode::Rgb8),
        ("rgba8", ImageDecode::Rgba8),
        ("l", ImageDecode::L),
        ("rgb", ImageDecode::Rgb),
        ("rgba", ImageDecode::Rgba),
        ("torchl8", ImageDecode::TorchL8),
        ("torchrgb8", ImageDecode::TorchRgb8),
        ("torchrgba8", ImageDecode::TorchRgba8),
        ("torchl", ImageDecode::TorchL),
        ("torchrgb", ImageDecode::TorchRgb),
        ("torchrgba", ImageDecode::TorchRgba),
        ("raw", ImageDecode::Raw),
    ];

    /// The mode's name (`rgb8`, `torchrgb`, ...).
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, m)| *m == self).map_or("raw", |(n, _)| n)
    }

    /// (channels, float, channels first), or `None` for [`ImageDecode::Raw`].
    fn layout(self) -> Option<(usize, bool, bool)> {
        use ImageDecode::*;
        Some(match self {
            L8 => (1, false, false),
            Rgb8 => (3, false, false),
            Rgba8 => (4, false, false),
            L => (1, true, false),
            Rgb => (3, true, false),
            Rgba => (4, true, false),
            TorchL8 => (1, false, true),
            TorchRgb8 => (3, false, true),
            TorchRgba8 => (4, false, true),
            TorchL => (1, true, true),
            TorchRgb => (3, true, true),
            TorchRgba => (4, true, true),
            Raw => return None,
        })
    }
}

impl fmt::Display for ImageDecode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ImageDecode {
    type Err = String;

    /// Parses a reference mode name; `torch` is `torchrgb`. The PIL modes (`pil`, `pilrgb`, ...)
    /// have no Rust equivalent and are rejected.
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "torch" {
            return Ok(ImageDecode::TorchRgb);
        }
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, m)| *m).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
            format!("unknown image decode mode {s:?} (one of {})", names.join(", "))
        })
    }
}

/// Decodes an image (whatever its extension says, the format is found from the content, as PIL
/// does) into the layout of `mode`. `mode` must not be [`ImageDecode::Raw`].
///
/// JPEG content goes through libjpeg (Pillow's pixels, see the `jpeg` module), every other
/// format through the `image` crate. Images of more pixels than `limits` allow are refused from
/// their header, before their pixels are allocated.
pub(crate) fn decode_image(
    data: &[u8],
    mode: ImageDecode,
    limits: &DecodeLimits,
) -> Result<Tensor, DecodeError> {
    let Some((channels, float, chw)) = mode.layout() else {
        return Err(DecodeError::Invalid("images are not decoded in raw mode".to_owned()));
    };
    let invalid = |msg: String| DecodeError::Invalid(msg);
    let format = image::guess_format(data)
        .map_err(|_| invalid("not an image in a format energon-rs decodes".to_owned()))?;
    if format == ImageFormat::Jpeg {
        let jpeg = super::jpeg::decode_jpeg(data, channels, limits.max_image_pixels)?;
        return Ok(to_layout(jpeg.pixels, jpeg.width, jpeg.height, channels, float, chw));
    }
    let name = format.extensions_str()[0];
    if format == ImageFormat::Tiff && super::tiff_palette::is_palette_tiff(data) {
        let bad = |e: String| invalid(format!("invalid {name} image: {e}"));
        let (width, height) = super::tiff_palette::dimensions(data).map_err(bad)?;
        check_pixels(name, u64::from(width), u64::from(height), limits.max_image_pixels)?;
        let img = super::tiff_palette::decode(data).map_err(bad)?;
        let hwc = match channels {
            1 => pil_luma(&img.rgb),
            3 => img.rgb,
            // A TIFF palette has no alpha: `P` converts to opaque RGBA.
            _ => img.rgb.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect(),
        };
        return Ok(to_layout(hwc, img.width, img.height, channels, float, chw));
    }
    let bad = |e: image::ImageError| invalid(format!("invalid {name} image: {e}"));
    let (width, height) =
        ImageReader::with_format(Cursor::new(data), format).into_dimensions().map_err(bad)?;
    check_pixels(name, u64::from(width), u64::from(height), limits.max_image_pixels)?;
    // The pixel limit above is Pillow's; the `image` crate's own allocation limit (512 MiB) would
    // refuse images Pillow opens.
    let mut reader = ImageReader::with_format(Cursor::new(data), format);
    reader.no_limits();
    let img = pil_i16_to_8(reader.decode().map_err(bad)?);
    let (width, height) = (img.width() as usize, img.height() as usize);
    let hwc = match channels {
        1 => to_pil_luma(img),
        3 => img.into_rgb8().into_raw(),
        _ => img.into_rgba8().into_raw(),
    };
    Ok(to_layout(hwc, width, height, channels, float, chw))
}

/// Pillow's decompression-bomb rule for an image of `width` x `height` pixels (a zero side
/// counts as 1): more than twice `max_pixels` is an error, more than `max_pixels` a warning.
pub(super) fn check_pixels(
    format: &str,
    width: u64,
    height: u64,
    max_pixels: Option<u64>,
) -> Result<(), DecodeError> {
    let Some(max) = max_pixels else { return Ok(()) };
    let pixels = width.max(1) * height.max(1);
    if pixels > max.saturating_mul(2) {
        return Err(DecodeError::TooLarge {
            limit: Limit::ImagePixels,
            reason: format!(
                "{format} image of {width}x{height} = {pixels} pixels is over the limit of {} \
                 pixels (twice max_image_pixels = {max}, Pillow's decompression bomb check)",
                max.saturating_mul(2)
            ),
        });
    }
    if pixels > max {
        tracing::warn!(
            "{format} image of {width}x{height} = {pixels} pixels is over max_image_pixels = \
             {max}: it could be a decompression bomb"
        );
    }
    Ok(())
}

/// `u8` HWC pixels with `channels` channels as the tensor of a layout (float or not, channels
/// first or last).
fn to_layout(
    hwc: Vec<u8>,
    width: usize,
    height: usize,
    channels: usize,
    float: bool,
    chw: bool,
) -> Tensor {
    // Grayscale HWC is 2-D, as numpy sees a PIL `L` image.
    let hwc_shape = if channels == 1 { vec![height, width] } else { vec![height, width, channels] };
    let (shape, data) = match (chw, float) {
        (false, false) => (hwc_shape, TensorData::U8(hwc)),
        (false, true) => (hwc_shape, TensorData::F32(hwc.iter().map(|&v| unit(v)).collect())),
        (true, false) => (vec![channels, height, width], TensorData::U8(to_chw(&hwc, channels))),
        (true, true) => {
            (vec![channels, height, width], TensorData::F32(to_chw_unit(&hwc, channels)))
        }
    };
    Tensor { shape, data }
}

/// `v / 255` as `f32` for every byte value, computed as the reference does (`float32(v) / 255`);
/// a table lookup is several times faster than the division per element.
static UNIT: [f32; 256] = {
    let mut table = [0f32; 256];
    let mut v = 0;
    while v < 256 {
        table[v] = v as f32 / 255.0;
        v += 1;
    }
    table
};

fn unit(v: u8) -> f32 {
    UNIT[usize::from(v)]
}

/// HWC bytes → CHW floats in `[0, 1]`, in one pass per channel.
fn to_chw_unit(hwc: &[u8], channels: usize) -> Vec<f32> {
    let mut res = Vec::with_capacity(hwc.len());
    for c in 0..channels {
        res.extend(hwc[c..].iter().step_by(channels).map(|&v| unit(v)));
    }
    res
}

/// COMPAT(Pillow 13): 16-bit grayscale (PNG, TIFF) opens as mode `I;16`, whose conversion to
/// `L`, `RGB` and `RGBA` clips the values to 255 (rather than scaling them); other images as
/// they are.
fn pil_i16_to_8(img: DynamicImage) -> DynamicImage {
    match img {
        DynamicImage::ImageLuma16(gray) => {
            let (w, h) = gray.dimensions();
            DynamicImage::ImageLuma8(image::GrayImage::from_fn(w, h, |x, y| {
                image::Luma([gray.get_pixel(x, y)[0].min(255) as u8])
            }))
        }
        other => other,
    }
}

/// Grayscale as PIL's `convert("L")` computes it from RGB (see [`pil_luma`]); gray images keep
/// their values.
fn to_pil_luma(img: DynamicImage) -> Vec<u8> {
    match img {
        DynamicImage::ImageLuma8(gray) => gray.into_raw(),
        DynamicImage::ImageLumaA8(gray) => gray.into_raw().chunks_exact(2).map(|p| p[0]).collect(),
        other => pil_luma(&other.into_rgb8().into_raw()),
    }
}

/// RGB bytes to grayscale as PIL's `convert("L")` does: ITU-R 601-2 luma in 16-bit fixed point,
/// rounded.
pub(super) fn pil_luma(rgb: &[u8]) -> Vec<u8> {
    rgb.chunks_exact(3)
        .map(|p| {
            let l = u32::from(p[0]) * 19595 + u32::from(p[1]) * 38470 + u32::from(p[2]) * 7471;
            ((l + 0x8000) >> 16) as u8
        })
        .collect()
}

/// HWC → CHW.
fn to_chw(hwc: &[u8], channels: usize) -> Vec<u8> {
    if channels == 1 {
        return hwc.to_vec();
    }
    let n_pixels = hwc.len() / channels;
    let mut res = vec![0u8; hwc.len()];
    for (i, pixel) in hwc.chunks_exact(channels).enumerate() {
        for (c, &v) in pixel.iter().enumerate() {
            res[c * n_pixels + i] = v;
        }
    }
    res
}

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn the_table_is_the_division() {
        for v in 0..=255u8 {
            assert_eq!(unit(v).to_bits(), (f32::from(v) / 255.0).to_bits(), "{v}");
        }
    }

    #[test]
    fn chw_floats_are_the_chw_bytes_scaled() {
        let hwc: Vec<u8> = (0..4 * 5 * 3).map(|i| (i * 17 % 256) as u8).collect();
        let want: Vec<f32> = to_chw(&hwc, 3).iter().map(|&v| f32::from(v) / 255.0).collect();
        assert_eq!(to_chw_unit(&hwc, 3), want);
        assert_eq!(to_chw_unit(&hwc, 1), hwc.iter().map(|&v| unit(v)).collect::<Vec<_>>());
    }
}
