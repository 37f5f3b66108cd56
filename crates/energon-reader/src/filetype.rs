//! What a content is, from its first bytes, as the `filetype` package (1.2) guesses it: its
//! image, audio and video signatures, tried in its order (images, then audio, then video) on the
//! first 8192 bytes. The reference guesses with that package wherever it looks at content: the
//! decoder's `guess_content` (the part is decoded as the guessed extension), `prepare-media`'s
//! header strategy (the MIME type's `image/`, `audio/` or `video/`), and `AVDecoder`'s
//! container type. All three use this one table.
//!
//! `filetype` also knows fonts, documents and archives, tried after the media types; they are
//! not guessed here (`None`), so a content that no media signature matches keeps its name's
//! extension, where the reference would take the archive's.

/// What kind of media a guess is, by the MIME type `filetype` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `image/*`.
    Image,
    /// `audio/*`.
    Audio,
    /// `video/*`.
    Video,
    /// Among `filetype`'s images, but not `image/*` (DICOM is `application/dicom`).
    Other,
}

/// How many leading bytes `filetype` looks at.
pub(crate) const SIGNATURE_BYTES: usize = 8192;

fn at(buf: &[u8], offset: usize, sig: &[u8]) -> bool {
    buf.get(offset..offset + sig.len()) == Some(sig)
}

fn find(buf: &[u8], needle: &[u8]) -> bool {
    buf.windows(needle.len()).any(|w| w == needle)
}

/// An ISO base media file's major and compatible brands, where the `ftyp` box is whole.
fn ftyp(buf: &[u8]) -> Option<(&[u8], Vec<&[u8]>)> {
    if buf.len() < 16 || !at(buf, 4, b"ftyp") {
        return None;
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if buf.len() < len {
        return None;
    }
    let compatible = (16..len).step_by(4).map(|i| &buf[i..(i + 4).min(buf.len())]).collect();
    Some((&buf[8..12], compatible))
}

/// An animated PNG: an `acTL` chunk before the first `IDAT` or `IEND`.
fn apng(buf: &[u8]) -> bool {
    if buf.len() <= 8 || !at(buf, 0, b"\x89PNG\r\n\x1a\n") {
        return false;
    }
    let mut i = 8;
    while buf.len() > i {
        let len = buf
            .get(i..i + 4)
            .map_or(0, |b| b.iter().fold(0usize, |acc, &x| (acc << 8) | usize::from(x)));
        let kind = buf.get(i + 4..(i + 8).min(buf.len())).unwrap_or(&[]);
        match kind {
            b"IDAT" | b"IEND" => return false,
            b"acTL" => return true,
            _ => {}
        }
        i += 8 + len + 4;
    }
    false
}

fn tiff_header(buf: &[u8]) -> bool {
    at(buf, 0, b"II*\0") || at(buf, 0, b"MM\0*")
}

/// The extension and kind `filetype.guess` gives `data`, among its media types.
pub(crate) fn guess(data: &[u8]) -> Option<(&'static str, Kind)> {
    use Kind::{Audio, Image, Other, Video};
    let buf = &data[..data.len().min(SIGNATURE_BYTES)];
    let n = buf.len();
    let brands = ftyp(buf);
    let major_or_mif = |brand: &[u8]| {
        brands.as_ref().is_some_and(|(major, compatible)| {
            *major == brand || (matches!(*major, b"mif1" | b"msf1") && compatible.contains(&brand))
        })
    };
    let image: [(bool, &'static str, Kind); 17] = [
        (at(buf, 0, b"AC10"), "dwg", Image),
        (at(buf, 0, b"gimp xcf v"), "xcf", Image),
        (n > 2 && at(buf, 0, &[0xff, 0xd8, 0xff]), "jpg", Image),
        (n > 50 && at(buf, 0, &[0, 0, 0, 0x0c]) && at(buf, 16, b"ftypjp2 "), "jpx", Image),
        (apng(buf), "apng", Image),
        (n > 3 && at(buf, 0, b"\x89PNG"), "png", Image),
        (n > 2 && at(buf, 0, b"GIF"), "gif", Image),
        (n > 13 && at(buf, 0, b"RIFF") && at(buf, 8, b"WEBPVP"), "webp", Image),
        (n > 9 && tiff_header(buf) && !at(buf, 8, b"CR"), "tif", Image),
        (n > 9 && tiff_header(buf) && at(buf, 8, b"CR"), "cr2", Image),
        (n > 1 && at(buf, 0, b"BM"), "bmp", Image),
        (n > 2 && at(buf, 0, &[0x49, 0x49, 0xbc]), "jxr", Image),
        (n > 3 && at(buf, 0, b"8BPS"), "psd", Image),
        (n > 3 && at(buf, 0, &[0, 0, 1, 0]), "ico", Image),
        (major_or_mif(b"heic"), "heic", Image),
        (n > 132 && at(buf, 128, b"DICM"), "dcm", Other),
        (major_or_mif(b"avif"), "avif", Image),
    ];
    let audio: [(bool, &'static str, Kind); 9] = [
        (at(buf, 0, &[0xff, 0xf1]) || at(buf, 0, &[0xff, 0xf9]), "aac", Audio),
        (n > 3 && at(buf, 0, b"MThd"), "midi", Audio),
        (
            n > 2
                && (at(buf, 0, b"ID3")
                    || at(buf, 0, &[0xff, 0xf2])
                    || at(buf, 0, &[0xff, 0xf3])
                    || at(buf, 0, &[0xff, 0xfb])),
            "mp3",
            Audio,
        ),
        (n > 10 && (at(buf, 4, b"ftypM4A") || at(buf, 0, b"M4A ")), "m4a", Audio),
        (n > 3 && at(buf, 0, b"OggS"), "ogg", Audio),
        (n > 3 && at(buf, 0, b"fLaC"), "flac", Audio),
        (n > 11 && at(buf, 0, b"RIFF") && at(buf, 8, b"WAVE"), "wav", Audio),
        (n > 11 && at(buf, 0, b"#!AMR\n"), "amr", Audio),
        (n > 11 && at(buf, 0, b"FORM") && at(buf, 8, b"AIFF"), "aiff", Audio),
    ];
    let ebml = at(buf, 0, &[0x1a, 0x45, 0xdf, 0xa3]);
    let mp4 = |b: &[u8]| matches!(b, b"mp41" | b"mp42" | b"isom");
    let video: [(bool, &'static str, Kind); 10] = [
        (at(buf, 0, b"ftyp3gp"), "3gp", Video),
        (
            brands
                .as_ref()
                .is_some_and(|(major, compatible)| compatible.iter().any(|b| mp4(b)) || mp4(major)),
            "mp4",
            Video,
        ),
        (n > 10 && at(buf, 0, &[0, 0, 0, 0x1c]) && at(buf, 4, b"ftypM4V"), "m4v", Video),
        (ebml && find(buf, b"\x42\x82\x88matroska"), "mkv", Video),
        (brands.as_ref().is_some_and(|(major, _)| *major == b"qt  "), "mov", Video),
        (n > 11 && at(buf, 0, b"RIFF") && at(buf, 8, b"AVI "), "avi", Video),
        (
            n > 9 && at(buf, 0, &[0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11, 0xa6, 0xd9]),
            "wmv",
            Video,
        ),
        (n > 3 && at(buf, 0, &[0, 0, 1]) && (0xb0..=0xbf).contains(&buf[3]), "mpg", Video),
        (ebml && find(buf, b"\x42\x82\x84webm"), "webm", Video),
        (n > 3 && at(buf, 0, b"FLV\x01"), "flv", Video),
    ];
    image
        .into_iter()
        .chain(audio)
        .chain(video)
        .find(|(matched, _, _)| *matched)
        .map(|(_, ext, kind)| (ext, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_signature_in_filetypes_order_wins() {
        let ftyp = |major: &[u8], compatible: &[&[u8]]| {
            let len = 16 + 4 * compatible.len();
            let mut b = (len as u32).to_be_bytes().to_vec();
            b.extend_from_slice(b"ftyp");
            b.extend_from_slice(major);
            b.extend_from_slice(&[0; 4]);
            for c in compatible {
                b.extend_from_slice(c);
            }
            b.extend_from_slice(&[0; 16]);
            b
        };
        // Audio before video: an M4A whose brands also name isom is audio.
        assert_eq!(guess(&ftyp(b"M4A ", &[b"isom"])), Some(("m4a", Kind::Audio)));
        assert_eq!(guess(&ftyp(b"isom", &[b"mp41"])), Some(("mp4", Kind::Video)));
        assert_eq!(guess(&ftyp(b"qt  ", &[])), Some(("mov", Kind::Video)));
        assert_eq!(guess(&ftyp(b"mif1", &[b"heic"])), Some(("heic", Kind::Image)));
        // A box longer than the content is no ISO file.
        assert_eq!(guess(&ftyp(b"isom", &[b"mp41"])[..18]), None);
        // A RIFF WAVE is audio, a RIFF AVI video, a RIFF WEBP image.
        assert_eq!(guess(b"RIFF\0\0\0\0WAVEfmt "), Some(("wav", Kind::Audio)));
        assert_eq!(guess(b"RIFF\0\0\0\0AVI LIST"), Some(("avi", Kind::Video)));
        assert_eq!(guess(b"RIFF\0\0\0\0WEBPVP8 "), Some(("webp", Kind::Image)));
        // Only the MPEG sync words filetype knows are MP3; ADTS is AAC.
        assert_eq!(guess(&[0xff, 0xfb, 0x90, 0]), Some(("mp3", Kind::Audio)));
        assert_eq!(guess(&[0xff, 0xe3, 0x90, 0]), None);
        assert_eq!(guess(&[0xff, 0xf1, 0x50, 0]), Some(("aac", Kind::Audio)));
        // TIFF and Canon raw share a header.
        assert_eq!(guess(b"II*\0\x10\0\0\0CR\x02\0"), Some(("cr2", Kind::Image)));
        assert_eq!(guess(b"II*\0\x08\0\0\0\0\0\0"), Some(("tif", Kind::Image)));
        // An animated PNG has acTL before its image data.
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend_from_slice(&[0, 0, 0, 8]);
        png.extend_from_slice(b"acTL\0\0\0\x01\0\0\0\0\0\0\0\0");
        assert_eq!(guess(&png), Some(("apng", Kind::Image)));
        // DICOM is among filetype's images, but not an image type.
        let mut dcm = vec![0u8; 128];
        dcm.extend_from_slice(b"DICM\0");
        assert_eq!(guess(&dcm), Some(("dcm", Kind::Other)));
        // Matroska and WebM by their doc type; only the first 8192 bytes count.
        let mut mkv = vec![0x1a, 0x45, 0xdf, 0xa3];
        mkv.extend_from_slice(b"\x42\x82\x84webm");
        assert_eq!(guess(&mkv), Some(("webm", Kind::Video)));
        let mut late = vec![0x1a, 0x45, 0xdf, 0xa3];
        late.resize(9000, 0);
        late.extend_from_slice(b"\x42\x82\x84webm");
        assert_eq!(guess(&late), None);
        assert_eq!(guess(b""), None);
    }
}
