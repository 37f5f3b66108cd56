//! Decoding parts by their extension, as the reference's default sample decoder does.
//!
//! The handler chain, per part (the part name is the member name after the key, e.g. `jpg` or
//! `seg.png`; "extension" is its last dot-separated component):
//!
//! 1. a name ending in `.gz` is gunzipped (to at most [`DecodeLimits::max_gunzipped_bytes`]) and
//!    decoded as the name without `.gz`;
//! 2. images (`jpg jpeg png webp gif bmp tif tiff ...`, case-insensitive, see
//!    [`IMAGE_EXTENSIONS`]) → [`Decoded::Image`] in the layout of [`ImageDecode`] (JPEG through
//!    libjpeg, Pillow's pixels exactly; every other format through the `image` crate), images
//!    over Pillow's pixel limit ([`DecodeLimits::max_image_pixels`]) refused;
//! 3. audio (`wav flac mp3 ogg`, case-insensitive) → [`Decoded::Audio`] (`f32` PCM and sample
//!    rate); video (`mp4 avi mov webm mkv flv`) → [`Decoded::Video`], the raw bytes (see
//!    [`Video`]). The reference has no `ogg` here (it returns the bytes);
//! 4. `txt text transcript` → [`Decoded::Text`]; `cls cls2 index inx id` → [`Decoded::Int`];
//!    `json jsn` → [`Decoded::Json`]; `npy` → [`Decoded::Tensor`] (case-sensitive);
//! 5. anything else (including Python-only formats: `pyd pickle pth ten mp msg npz cbor`) →
//!    [`Decoded::Bytes`].
//!
//! With [`Decoder::guess_content`], steps 2 and 3 look at the content's magic bytes instead of
//! the name when the content is recognized.

mod audio;
mod image;
mod jpeg;
#[cfg(test)]
pub(crate) mod limit_tests;
mod npy;
mod tensor;
#[cfg(test)]
mod tests;
mod tiff_palette;

use std::{fmt, io::Read as _};

use bytes::Bytes;
use serde_json::Value;

pub use self::{
    audio::Audio,
    image::ImageDecode,
    tensor::{Tensor, TensorData},
};

/// Image extensions (compared lower-cased): the list the reference's image handler uses (every
/// extension Pillow opens). Images in formats the `image` crate does not decode (`psd`, `eps`,
/// `jp2`, ...) are decode errors.
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "blp", "bmp", "dib", "bufr", "cur", "pcx", "dcx", "dds", "ps", "eps", "fit", "fits", "fli",
    "flc", "ftc", "ftu", "gbr", "gif", "grib", "h5", "hdf", "png", "apng", "jp2", "j2k", "jpc",
    "jpf", "jpx", "j2c", "icns", "ico", "im", "iim", "tif", "tiff", "jfif", "jpe", "jpg", "jpeg",
    "mpg", "mpeg", "msp", "pcd", "pxr", "pbm", "pgm", "ppm", "pnm", "psd", "bw", "rgb", "rgba",
    "sgi", "ras", "tga", "icb", "vda", "vst", "webp", "wmf", "emf", "xbm", "xpm",
];
/// Audio extensions, decoded to PCM.
pub const AUDIO_EXTENSIONS: &[&str] = &["wav", "flac", "mp3", "ogg"];
/// Video extensions, kept as raw bytes.
pub const VIDEO_EXTENSIONS: &[&str] = &["mp4", "avi", "mov", "webm", "mkv", "flv"];

/// A decoded part.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Decoded {
    /// An image, in the layout the decoder's [`ImageDecode`] asks for.
    Image(Tensor),
    /// UTF-8 text.
    Text(String),
    /// Parsed JSON (object key order kept).
    Json(Value),
    /// An integer (class labels).
    Int(i64),
    /// A numpy array.
    Tensor(Tensor),
    /// Decoded audio.
    Audio(Audio),
    /// A video (or, with [`AvDecode::Raw`], an audio file), not decoded.
    Video(Video),
    /// Audio and video decoded whole ([`AvDecode::Frames`]: the reference's `get_frames`);
    /// `None` for a file type that has no frames to give.
    #[cfg(feature = "video")]
    Av(Option<crate::av::AvData>),
    /// Undecoded bytes (a zero-copy slice of the shard).
    Bytes(Bytes),
}

impl Decoded {
    /// A short description for listings: `image Tensor(shape=[32, 32, 3], dtype=uint8)`,
    /// `text (21 chars)`, ...
    pub fn summary(&self) -> String {
        match self {
            Decoded::Image(t) => format!("image {t}"),
            Decoded::Text(s) => format!("text ({} chars)", s.chars().count()),
            Decoded::Json(v) => format!("json {}", json_kind(v)),
            Decoded::Int(i) => format!("int {i}"),
            Decoded::Tensor(t) => format!("array {t}"),
            Decoded::Audio(a) => format!(
                "audio {} channels x {} samples at {} Hz ({:.2} s)",
                a.channels(),
                a.frames(),
                a.sample_rate,
                a.duration()
            ),
            Decoded::Video(v) => {
                format!("video {} ({} bytes, not decoded)", v.format, v.data.len())
            }
            #[cfg(feature = "video")]
            Decoded::Av(Some(av)) => format!(
                "av {} video clip(s), {} audio clip(s)",
                av.video_clips.len(),
                av.audio_clips.len()
            ),
            #[cfg(feature = "video")]
            Decoded::Av(None) => "av (no frames)".to_owned(),
            Decoded::Bytes(b) => format!("bytes ({} bytes)", b.len()),
        }
    }
}

pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// A video part as it is in the shard (no copy): for [`crate::av::AvDecoder`] (feature `video`)
/// or another video library to decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Video {
    /// The container extension (`mp4`, `mkv`, ...).
    pub format: String,
    /// The undecoded file.
    pub data: Bytes,
}

impl Video {
    /// Why the frames are not available.
    pub const NOT_DECODED: &'static str = "the part is kept as raw bytes (Video::data), for \
        energon_reader::av::AvDecoder (feature video) or a video library to decode";
}

impl fmt::Display for Video {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} video, {} bytes ({})", self.format, self.data.len(), Self::NOT_DECODED)
    }
}

/// What to do with audio and video parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AvDecode {
    /// Decode audio to PCM; keep video as [`Decoded::Video`].
    #[default]
    Decode,
    /// Keep audio and video as [`Decoded::Video`] / [`Decoded::Bytes`]-like raw parts.
    Raw,
    /// Decode the audio and video files of the reference's AV list (`mp4 avi mov webm mkv flv
    /// flac mp3 wav`) whole into [`Decoded::Av`], as the reference's `av_decode="torch"` does
    /// (`with_audio`: its `video_decode_audio`); other audio parts (`ogg`) stay bytes. Needs the
    /// `video` feature: without it, such parts are decode errors.
    Frames {
        /// Decode the audio of video files too.
        with_audio: bool,
    },
}

/// The extensions the reference's AV decoder takes (others are left to later handlers).
const AV_DECODER_EXTENSIONS: &[&str] =
    &["mp4", "avi", "mov", "webm", "mkv", "flac", "mp3", "wav", "flv"];

/// Why a part could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The content is not valid for its kind (a corrupt image, invalid JSON, bad UTF-8, audio
    /// that does not decode completely, ...).
    #[error("{0}")]
    Invalid(String),
    /// The part would decode to more than a [`DecodeLimits`] limit allows; refused before the
    /// memory is allocated.
    #[error("{reason}")]
    TooLarge {
        /// The limit.
        limit: Limit,
        /// What was found, against which limit.
        reason: String,
    },
}

impl From<String> for DecodeError {
    fn from(reason: String) -> Self {
        DecodeError::Invalid(reason)
    }
}

/// The limits of [`DecodeLimits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// [`DecodeLimits::max_image_pixels`].
    ImagePixels,
    /// [`DecodeLimits::max_gunzipped_bytes`].
    GunzippedBytes,
}

/// How much one part may make the decoder allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Pillow's `Image.MAX_IMAGE_PIXELS`, with Pillow's rule: an image of more than twice this
    /// many pixels (width x height from its header) is refused, one of more than this many is
    /// logged as a warning. `None` turns the check off (as `MAX_IMAGE_PIXELS = None` does).
    pub max_image_pixels: Option<u64>,
    /// The most bytes a `.gz` part may inflate to; decompression stops there with an error.
    /// `None`: no limit (the reference has none).
    pub max_gunzipped_bytes: Option<u64>,
}

impl DecodeLimits {
    /// Pillow's default `Image.MAX_IMAGE_PIXELS`: 1024 * 1024 * 1024 / 4 / 3.
    pub const PILLOW_MAX_IMAGE_PIXELS: u64 = 89_478_485;
    /// The default decompressed-size limit of a `.gz` part: 256 MiB, far more than a sample's
    /// part is expected to hold (compressed images and audio stay compressed inside the gzip
    /// data), and little enough memory that a gzip bomb is refused without harm.
    pub const DEFAULT_MAX_GUNZIPPED_BYTES: u64 = 256 << 20;
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_image_pixels: Some(Self::PILLOW_MAX_IMAGE_PIXELS),
            max_gunzipped_bytes: Some(Self::DEFAULT_MAX_GUNZIPPED_BYTES),
        }
    }
}

/// Decodes parts by name (the reference's `SampleDecoder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decoder {
    /// How images are decoded.
    pub image: ImageDecode,
    /// How audio and video are decoded.
    pub av: AvDecode,
    /// Recognize images, audio and video by their content rather than their name.
    pub guess_content: bool,
    /// How much one part may make the decoder allocate.
    pub limits: DecodeLimits,
}

/// What kind of value a part name decodes to (without decoding it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartKind {
    /// An image extension.
    Image,
    /// An audio extension.
    Audio,
    /// A video extension.
    Video,
    /// A text extension.
    Text,
    /// A class-label extension.
    Int,
    /// A JSON extension.
    Json,
    /// `npy`.
    Npy,
    /// Anything else: raw bytes.
    Bytes,
}

impl PartKind {
    /// The kind of a part name (after removing a `.gz` suffix), by its last extension.
    pub fn of(part: &str) -> PartKind {
        let part = part.strip_suffix(".gz").unwrap_or(part);
        let ext = part.rsplit('.').next().unwrap_or(part);
        let lower = ext.to_ascii_lowercase();
        if IMAGE_EXTENSIONS.contains(&lower.as_str()) {
            return PartKind::Image;
        }
        if AUDIO_EXTENSIONS.contains(&lower.as_str()) {
            return PartKind::Audio;
        }
        if VIDEO_EXTENSIONS.contains(&lower.as_str()) {
            return PartKind::Video;
        }
        match ext {
            "txt" | "text" | "transcript" => PartKind::Text,
            "cls" | "cls2" | "index" | "inx" | "id" => PartKind::Int,
            "json" | "jsn" => PartKind::Json,
            "npy" => PartKind::Npy,
            _ => PartKind::Bytes,
        }
    }
}

impl Decoder {
    /// Decodes part `part` (its name, such as `jpg` or `seg.png`). Errors are a reason only; the
    /// caller adds where the part lies. [`Decoder::try_decode`] tells a limit from bad content.
    pub fn decode(&self, part: &str, data: &Bytes) -> Result<Decoded, String> {
        self.try_decode(part, data).map_err(|e| e.to_string())
    }

    /// [`Decoder::decode`], with the kind of error.
    pub fn try_decode(&self, part: &str, data: &Bytes) -> Result<Decoded, DecodeError> {
        if let Some(inner) = part.strip_suffix(".gz") {
            return self.try_decode(inner, &gunzip(data, self.limits.max_gunzipped_bytes)?);
        }
        let mut kind = PartKind::of(part);
        let ext = part.rsplit('.').next().unwrap_or(part);
        let mut format = ext.to_ascii_lowercase();
        if self.guess_content
            && let Some((guessed, _)) = crate::filetype::guess(data)
        {
            // The reference decodes the part as the extension `filetype` guesses.
            kind = PartKind::of(guessed);
            guessed.clone_into(&mut format);
        }
        match kind {
            PartKind::Image if self.image == ImageDecode::Raw => Ok(Decoded::Bytes(data.clone())),
            PartKind::Image => {
                image::decode_image(data, self.image, &self.limits).map(Decoded::Image)
            }
            PartKind::Audio if self.av == AvDecode::Decode => {
                Ok(audio::decode_audio(data, &format).map(Decoded::Audio)?)
            }
            PartKind::Audio | PartKind::Video => match self.av {
                AvDecode::Frames { with_audio } => decode_frames(data, &format, with_audio),
                _ => Ok(Decoded::Video(Video { format, data: data.clone() })),
            },
            PartKind::Text => Ok(std::str::from_utf8(data)
                .map(|s| Decoded::Text(s.to_owned()))
                .map_err(|e| format!("text is not valid UTF-8: {e}"))?),
            PartKind::Int => Ok(parse_int(data).map(Decoded::Int)?),
            PartKind::Json => Ok(serde_json::from_slice(data)
                .map(Decoded::Json)
                .map_err(|e| format!("invalid JSON: {e}"))?),
            PartKind::Npy => Ok(npy::decode_npy(data).map(Decoded::Tensor)?),
            PartKind::Bytes => Ok(Decoded::Bytes(data.clone())),
        }
    }
}

/// [`AvDecode::Frames`]: the whole file, or its bytes for an extension the reference's AV
/// decoder does not take.
fn decode_frames(data: &Bytes, format: &str, with_audio: bool) -> Result<Decoded, DecodeError> {
    if !AV_DECODER_EXTENSIONS.contains(&format) {
        return Ok(Decoded::Bytes(data.clone()));
    }
    #[cfg(feature = "video")]
    {
        let decoder = crate::av::AvDecoder::new(data.clone(), format);
        decoder
            .frames(with_audio)
            .map(Decoded::Av)
            .map_err(|e| DecodeError::Invalid(e.fault.to_string()))
    }
    #[cfg(not(feature = "video"))]
    {
        let _ = with_audio;
        Err(DecodeError::Invalid(format!(
            "decoding {format} frames needs energon-reader's `video` feature (FFmpeg); this \
             build has none"
        )))
    }
}

/// Inflates a gzip part, stopping with [`DecodeError::TooLarge`] once it passes `limit` bytes (so
/// that a small part inflating to gigabytes takes no more than `limit` bytes of memory).
fn gunzip(data: &[u8], limit: Option<u64>) -> Result<Bytes, DecodeError> {
    let mut out = Vec::new();
    let mut decoder = flate2::read::GzDecoder::new(data);
    let read = match limit {
        Some(limit) => decoder.take(limit.saturating_add(1)).read_to_end(&mut out),
        None => decoder.read_to_end(&mut out),
    };
    read.map_err(|e| format!("invalid gzip data: {e}"))?;
    if let Some(limit) = limit
        && out.len() as u64 > limit
    {
        return Err(DecodeError::TooLarge {
            limit: Limit::GunzippedBytes,
            reason: format!(
                "the gzip data ({} bytes) inflates to more than the limit of {limit} bytes \
                 (max_gunzipped_bytes)",
                data.len()
            ),
        });
    }
    Ok(Bytes::from(out))
}

/// Python's `int(bytes)`: surrounding ASCII whitespace, an optional sign, decimal digits with
/// single underscores between them.
fn parse_int(data: &[u8]) -> Result<i64, String> {
    let bad =
        || format!("not an integer: {:?}", String::from_utf8_lossy(&data[..data.len().min(40)]));
    let text = std::str::from_utf8(data).map_err(|_| bad())?.trim_ascii();
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let valid = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'_');
    if !valid {
        return Err(bad());
    }
    let magnitude: i128 = digits.replace('_', "").parse().map_err(|_| bad())?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).map_err(|_| format!("integer {value} does not fit in 64 bits"))
}
