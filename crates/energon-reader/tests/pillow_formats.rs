//! Golden test of the other image formats: PNG (8 and 16 bits, palette, gray with alpha,
//! transparency chunks, Adam7), GIF (first frame, palette, transparency), BMP, TIFF and WebP
//! decode to Pillow's RGB, L and RGBA pixels, except where `KNOWN_DIFFERENT` says (the
//! differences docs/compat.md lists).
//!
//! `tests/data/pillow_formats/` holds the files and `digests.txt`, the sha256 of Pillow's
//! `convert("RGB" | "L" | "RGBA")` bytes; `tests/fixtures/tools/make_pillow_formats.py` writes both.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use energon_reader::{Decoded, Decoder, ImageDecode};
use sha2::{Digest, Sha256};

/// `(file, mode, what)`: where decoding differs from Pillow, `pixels` (other values) or `error`
/// (Pillow decodes the file, we refuse it).
const KNOWN_DIFFERENT: &[(&str, &str, &str)] = &[];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pillow_formats")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What decoding `file` in `mode` gives: the shape and digest, or the error.
fn ours(file: &str, mode: ImageDecode) -> Result<(Vec<usize>, String), String> {
    let data = Bytes::from(std::fs::read(data_dir().join(file)).unwrap());
    let ext = file.rsplit('.').next().unwrap();
    match (Decoder { image: mode, ..Decoder::default() }).decode(ext, &data)? {
        Decoded::Image(t) => Ok((t.shape.clone(), sha256_hex(t.as_u8().unwrap()))),
        other => Err(other.summary()),
    }
}

#[test]
fn pixels_are_pillows_except_the_known_differences() {
    let text = std::fs::read_to_string(data_dir().join("digests.txt")).unwrap();
    let mut differ = Vec::new();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(' ').collect();
        let file = fields[0];
        assert_ne!(fields[1], "error", "{file}: Pillow decodes every file of the set");
        let (w, h) = fields[1].split_once('x').unwrap();
        let (w, h): (usize, usize) = (w.parse().unwrap(), h.parse().unwrap());
        for (i, mode, name, shape) in [
            (2, ImageDecode::Rgb8, "rgb", vec![h, w, 3]),
            (3, ImageDecode::L8, "l", vec![h, w]),
            (4, ImageDecode::Rgba8, "rgba", vec![h, w, 4]),
        ] {
            n += 1;
            let want = fields[i].strip_prefix(&format!("{name}=")).unwrap();
            match ours(file, mode) {
                Ok((got_shape, digest)) if got_shape == shape && digest == want => {}
                Ok((got_shape, _)) if got_shape != shape => {
                    panic!("{file} {name}: shape {got_shape:?}, Pillow's is {shape:?}")
                }
                Ok(_) => differ.push((file.to_owned(), name, "pixels")),
                Err(e) => {
                    eprintln!("{file} {name}: {e}");
                    differ.push((file.to_owned(), name, "error"));
                }
            }
        }
    }
    assert_eq!(n, 32 * 3);
    let known: Vec<(String, &str, &str)> =
        KNOWN_DIFFERENT.iter().map(|&(f, m, w)| (f.to_owned(), m, w)).collect();
    assert_eq!(differ, known, "pixels that differ from Pillow's (update KNOWN_DIFFERENT)");
}
