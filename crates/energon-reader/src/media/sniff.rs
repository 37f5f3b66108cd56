//! Content sniffing for the header strategy: the image, video and audio signatures of the
//! `filetype` package (which the reference uses), reduced to the media type they imply.
//!
//! `filetype` looks at the first 262 bytes; a MIME type `image/*` means an image, `video/*` or
//! `audio/*` audio/video. Signatures of other types (archives, documents, fonts) give `None`.

use super::filter::MediaType;

/// How many leading bytes the sniffers look at.
pub(crate) const PROBE_SIZE: usize = 262;

/// The media type the content's signature implies, if any.
pub(crate) fn sniff_media_type(data: &[u8]) -> Option<MediaType> {
    let buf = &data[..data.len().min(PROBE_SIZE)];
    if is_image(buf) {
        Some(MediaType::Image)
    } else if is_video(buf) || is_audio(buf) {
        Some(MediaType::Av)
    } else {
        None
    }
}

fn at(buf: &[u8], offset: usize, sig: &[u8]) -> bool {
    buf.get(offset..offset + sig.len()) == Some(sig)
}

/// The major brand of an ISO base media file (`....ftyp<brand>`).
fn ftyp_brand(buf: &[u8]) -> Option<&[u8]> {
    (buf.len() >= 12 && at(buf, 4, b"ftyp")).then(|| &buf[8..12])
}

fn is_image(buf: &[u8]) -> bool {
    at(buf, 0, &[0xff, 0xd8, 0xff])                                  // jpg
        || at(buf, 0, &[0, 0, 0, 0x0c, b'j', b'P', b' ', b' ', 0x0d, 0x0a, 0x87, 0x0a]) // jpx
        || at(buf, 0, b"\x89PNG")                                    // png, apng
        || at(buf, 0, b"GIF")                                        // gif
        || at(buf, 8, b"WEBP")                                       // webp
        || (at(buf, 0, b"II*\0") && at(buf, 8, b"CR"))               // cr2
        || at(buf, 0, b"II*\0")                                      // tif
        || at(buf, 0, b"MM\0*")                                      // tif
        || at(buf, 0, b"BM")                                         // bmp
        || at(buf, 0, &[0x49, 0x49, 0xbc])                           // jxr
        || at(buf, 0, b"8BPS")                                       // psd
        || at(buf, 0, &[0, 0, 1, 0])                                 // ico
        || at(buf, 0, &[0xff, 0x0a])                                 // jxl codestream
        || at(buf, 0, &[0, 0, 0, 0x0c, b'J', b'X', b'L', b' ', 0x0d, 0x0a, 0x87, 0x0a]) // jxl
        || ftyp_brand(buf).is_some_and(|b| {
            matches!(b, b"heic" | b"heix" | b"hevc" | b"hevx" | b"mif1" | b"msf1" | b"avif" | b"avis")
        })
}

fn is_video(buf: &[u8]) -> bool {
    let matroska = at(buf, 0, &[0x1a, 0x45, 0xdf, 0xa3]);
    matroska && (contains(buf, b"webm") || contains(buf, b"matroska"))
        || ftyp_brand(buf).is_some_and(|b| {
            // mp4, m4v, mov and 3gp brands; audio-only M4A is audio (below).
            !matches!(b, b"M4A " | b"M4B " | b"F4A " | b"F4B ")
        })
        || at(buf, 4, b"moov")                                       // mov without ftyp
        || (at(buf, 0, b"RIFF") && at(buf, 8, b"AVI "))              // avi
        || at(buf, 0, &[0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11]) // wmv
        || at(buf, 0, &[0x46, 0x4c, 0x56, 0x01])                     // flv
        || (at(buf, 0, &[0, 0, 1]) && buf.get(3).is_some_and(|b| (0xba..=0xbf).contains(b))) // mpeg
}

fn is_audio(buf: &[u8]) -> bool {
    at(buf, 0, b"MThd")                                              // midi
        || at(buf, 0, b"ID3")                                        // mp3
        || at(buf, 0, &[0xff, 0xfb])
        || at(buf, 0, &[0xff, 0xf3])
        || at(buf, 0, &[0xff, 0xf2])
        || ftyp_brand(buf).is_some_and(|b| matches!(b, b"M4A " | b"M4B " | b"F4A " | b"F4B ")) // m4a
        || at(buf, 0, b"OggS")                                       // ogg
        || at(buf, 0, b"fLaC")                                       // flac
        || (at(buf, 0, b"RIFF") && at(buf, 8, b"WAVE"))              // wav
        || at(buf, 0, b"#!AMR\n")                                    // amr
        || (at(buf, 0, b"FORM") && at(buf, 8, b"AIFF"))              // aiff
        || at(buf, 0, &[0xff, 0xf1])                                 // aac
        || at(buf, 0, &[0xff, 0xf9])
}

fn contains(buf: &[u8], needle: &[u8]) -> bool {
    buf.windows(needle.len()).any(|w| w == needle)
}
