//! Recognizing images, audio and video by their magic bytes (the reference's `guess_content`).

use super::PartKind;

/// The kind and extension the content looks like, if recognized.
pub(crate) fn sniff(data: &[u8]) -> Option<(PartKind, &'static str)> {
    let riff = |tag: &[u8]| data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == tag;
    let found = if data.starts_with(&[0xff, 0xd8, 0xff]) {
        (PartKind::Image, "jpg")
    } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        (PartKind::Image, "png")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        (PartKind::Image, "gif")
    } else if riff(b"WEBP") {
        (PartKind::Image, "webp")
    } else if data.starts_with(b"BM") && data.len() > 14 {
        (PartKind::Image, "bmp")
    } else if data.starts_with(b"II*\0") || data.starts_with(b"MM\0*") {
        (PartKind::Image, "tif")
    } else if riff(b"WAVE") {
        (PartKind::Audio, "wav")
    } else if data.starts_with(b"fLaC") {
        (PartKind::Audio, "flac")
    } else if data.starts_with(b"OggS") {
        (PartKind::Audio, "ogg")
    } else if data.starts_with(b"ID3")
        || (data.len() >= 2 && data[0] == 0xff && data[1] & 0xe0 == 0xe0)
    {
        (PartKind::Audio, "mp3")
    } else if riff(b"AVI ") {
        (PartKind::Video, "avi")
    } else if data.len() >= 12 && &data[4..8] == b"ftyp" {
        (PartKind::Video, "mp4")
    } else if data.starts_with(&[0x1a, 0x45, 0xdf, 0xa3]) {
        (PartKind::Video, "mkv")
    } else if data.starts_with(b"FLV") {
        (PartKind::Video, "flv")
    } else {
        return None;
    };
    Some(found)
}
