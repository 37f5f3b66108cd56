//! Golden test of JPEG decoding: decoded JPEG pixels equal Pillow's, byte for byte.
//!
//! `tests/data/pillow_jpeg_digests.txt` holds the sha256 of Pillow's RGB, L and RGBA bytes (or
//! `error`) of every JPEG in the fixture shards and of the files in `tests/data/jpeg/`
//! (grayscale, 4:4:4, 4:2:2, odd sizes, progressive, restart markers, CMYK, corrupt and truncated
//! data, a bad Huffman table); `tests/fixtures/tools/make_pillow_digests.py` writes both.
#![allow(clippy::unwrap_used)]

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use bytes::Bytes;
use energon_reader::{Decoded, Decoder, ImageDecode, Tensor};
use sha2::{Digest, Sha256};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn shards_dir() -> PathBuf {
    energon_tests::ref_small_dir().join("shards")
}

/// Pillow's result for one JPEG.
#[derive(Debug)]
struct Expected {
    /// `shard.tar/member` or `jpeg/file`.
    name: String,
    /// `None`: Pillow refuses the file.
    pixels: Option<PillowPixels>,
}

#[derive(Debug)]
struct PillowPixels {
    width: usize,
    height: usize,
    rgb: String,
    l: String,
    rgba: String,
}

fn expected() -> Vec<Expected> {
    let text = std::fs::read_to_string(data_dir().join("pillow_jpeg_digests.txt")).unwrap();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let name = fields[0].to_owned();
            if fields[1..] == ["error"] {
                return Expected { name, pixels: None };
            }
            let (width, height) = fields[1].split_once('x').unwrap();
            let digest = |i: usize, key: &str| {
                fields[i].strip_prefix(key).unwrap_or_else(|| panic!("{line}")).to_owned()
            };
            let pixels = PillowPixels {
                width: width.parse().unwrap(),
                height: height.parse().unwrap(),
                rgb: digest(2, "rgb="),
                l: digest(3, "l="),
                rgba: digest(4, "rgba="),
            };
            Expected { name, pixels: Some(pixels) }
        })
        .collect()
}

/// The JPEG members of the fixture shards, as `shard.tar/member` with their bytes.
fn fixture_jpegs() -> Vec<(String, Bytes)> {
    let mut shards: Vec<PathBuf> = std::fs::read_dir(shards_dir())
        .unwrap_or_else(|e| panic!("{}: {e}", shards_dir().display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tar"))
        .collect();
    shards.sort();
    let mut out = Vec::new();
    for shard in shards {
        let shard_name = shard.file_name().unwrap().to_str().unwrap().to_owned();
        let mut archive = tar::Archive::new(std::fs::File::open(&shard).unwrap());
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let member = entry.path().unwrap().to_str().unwrap().to_owned();
            let lower = member.to_ascii_lowercase();
            if entry.header().entry_type().is_file()
                && (lower.ends_with(".jpg") || lower.ends_with(".jpeg"))
            {
                let mut data = Vec::new();
                entry.read_to_end(&mut data).unwrap();
                out.push((format!("{shard_name}/{member}"), Bytes::from(data)));
            }
        }
    }
    out
}

fn read_jpeg(name: &str, fixture: &[(String, Bytes)]) -> Bytes {
    if let Some(file) = name.strip_prefix("jpeg/") {
        return Bytes::from(std::fs::read(data_dir().join("jpeg").join(file)).unwrap());
    }
    fixture.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name}")).1.clone()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn decode(mode: ImageDecode, part: &str, data: &Bytes) -> Result<Tensor, String> {
    match (Decoder { image: mode, ..Decoder::default() }).decode(part, data)? {
        Decoded::Image(t) => Ok(t),
        other => panic!("{}", other.summary()),
    }
}

#[test]
fn every_fixture_jpeg_has_a_pillow_digest() {
    let names: Vec<String> = fixture_jpegs().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 200);
    let recorded: Vec<String> =
        expected().into_iter().map(|e| e.name).filter(|n| !n.starts_with("jpeg/")).collect();
    assert_eq!(names, recorded);
}

#[test]
fn rgb_l_and_rgba_pixels_are_pillows() {
    let fixture = fixture_jpegs();
    let expected = expected();
    assert_eq!(expected.len(), 216);
    for e in &expected {
        let data = read_jpeg(&e.name, &fixture);
        let Some(want) = &e.pixels else {
            for mode in [ImageDecode::Rgb8, ImageDecode::L8, ImageDecode::Rgba8] {
                let err = decode(mode, "jpg", &data).unwrap_err();
                assert!(err.contains("invalid jpg image"), "{}: {err}", e.name);
            }
            continue;
        };
        let (h, w) = (want.height, want.width);
        for (mode, shape, digest) in [
            (ImageDecode::Rgb8, vec![h, w, 3], &want.rgb),
            (ImageDecode::L8, vec![h, w], &want.l),
            (ImageDecode::Rgba8, vec![h, w, 4], &want.rgba),
        ] {
            let t = decode(mode, "jpg", &data).unwrap_or_else(|err| panic!("{}: {err}", e.name));
            assert_eq!(t.shape, shape, "{} {mode}", e.name);
            assert_eq!(&sha256_hex(t.as_u8().unwrap()), digest, "{} {mode}", e.name);
        }
    }
}

/// The RGB digest of decoding `data`, or `None` for an error.
fn rgb_digest(data: &Bytes) -> Option<String> {
    decode(ImageDecode::Rgb8, "jpg", data).ok().map(|t| sha256_hex(t.as_u8().unwrap()))
}

#[test]
fn failures_leave_later_images_on_any_thread_intact() {
    let fixture = fixture_jpegs();
    let expected = expected();
    let cases: Vec<(Bytes, Option<String>)> = expected
        .iter()
        .map(|e| (read_jpeg(&e.name, &fixture), e.pixels.as_ref().map(|p| p.rgb.clone())))
        .collect();
    // Each thread decodes every file twice from its own starting point, so that every failure is
    // followed by other images on the same thread while other threads decode too.
    std::thread::scope(|s| {
        for t in 0..4 {
            let cases = &cases;
            s.spawn(move || {
                let n = cases.len();
                for i in 0..2 * n {
                    let (data, want) = &cases[(i + t * 61) % n];
                    assert_eq!(&rgb_digest(data), want, "thread {t}, case {}", (i + t * 61) % n);
                }
            });
        }
    });
}

#[test]
fn sniffed_jpeg_content_goes_through_the_same_decoder() {
    let fixture = fixture_jpegs();
    let e = expected().into_iter().find(|e| e.name == "jpeg/cmyk_27x21.jpg").unwrap();
    let data = read_jpeg(&e.name, &fixture);
    let decoder = Decoder { guess_content: true, ..Decoder::default() };
    let Decoded::Image(t) = decoder.decode("bin", &data).unwrap() else { panic!() };
    assert_eq!(sha256_hex(t.as_u8().unwrap()), e.pixels.unwrap().rgb);
}

/// HWC bytes to CHW.
fn chw(hwc: &[u8], channels: usize) -> Vec<u8> {
    (0..channels).flat_map(|c| hwc[c..].iter().step_by(channels).copied()).collect()
}

#[test]
fn float_and_channel_first_modes_are_the_same_pixels() {
    let fixture = fixture_jpegs();
    for name in
        ["data-000002.tar/00000117.jpg", "jpeg/gray_33x17.jpg", "jpeg/cmyk_no_adobe_27x21.jpg"]
    {
        let data = read_jpeg(name, &fixture);
        for (u8_mode, channels, derived) in [
            (ImageDecode::L8, 1, [ImageDecode::L, ImageDecode::TorchL8, ImageDecode::TorchL]),
            (
                ImageDecode::Rgb8,
                3,
                [ImageDecode::Rgb, ImageDecode::TorchRgb8, ImageDecode::TorchRgb],
            ),
            (
                ImageDecode::Rgba8,
                4,
                [ImageDecode::Rgba, ImageDecode::TorchRgba8, ImageDecode::TorchRgba],
            ),
        ] {
            let hwc = decode(u8_mode, "jpg", &data).unwrap();
            let hwc_bytes = hwc.as_u8().unwrap();
            let (h, w) = (hwc.shape[0], hwc.shape[1]);
            let [float_hwc, torch_u8, torch_float] = derived;
            let as_float = |b: &[u8]| b.iter().map(|&v| f32::from(v) / 255.0).collect::<Vec<_>>();
            let t = decode(float_hwc, "jpg", &data).unwrap();
            assert_eq!((&t.shape, t.as_f32().unwrap()), (&hwc.shape, &as_float(hwc_bytes)[..]));
            let chw_bytes = chw(hwc_bytes, channels);
            let t = decode(torch_u8, "jpg", &data).unwrap();
            assert_eq!(t.shape, [channels, h, w], "{name} {torch_u8}");
            assert_eq!(t.as_u8().unwrap(), chw_bytes, "{name} {torch_u8}");
            let t = decode(torch_float, "jpg", &data).unwrap();
            assert_eq!(t.shape, [channels, h, w], "{name} {torch_float}");
            assert_eq!(t.as_f32().unwrap(), as_float(&chw_bytes), "{name} {torch_float}");
        }
    }
}
