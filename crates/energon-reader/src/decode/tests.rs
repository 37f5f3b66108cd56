//! Tests of the part decoders: every handler of the chain, image layouts, and bad input.

use std::io::{Cursor, Write};

use ::image::{ImageFormat, Rgb, RgbImage, Rgba, RgbaImage};

use super::*;

fn data_file(name: &str) -> Bytes {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    Bytes::from(std::fs::read(path).unwrap())
}

/// A 3x2 RGB test image: pixel (x, y) = (10x, 100y, 7).
fn test_rgb() -> RgbImage {
    RgbImage::from_fn(3, 2, |x, y| Rgb([10 * x as u8, 100 * y as u8, 7]))
}

fn encode(img: &RgbImage, format: ImageFormat) -> Bytes {
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).unwrap();
    Bytes::from(out.into_inner())
}

fn decode(decoder: Decoder, part: &str, data: &Bytes) -> Decoded {
    decoder.decode(part, data).unwrap()
}

fn rgb8() -> Decoder {
    Decoder::default()
}

fn image_decoder(image: ImageDecode) -> Decoder {
    Decoder { image, ..Decoder::default() }
}

#[test]
fn png_decodes_to_hwc_u8_by_default() {
    let Decoded::Image(t) = decode(rgb8(), "png", &encode(&test_rgb(), ImageFormat::Png)) else {
        panic!()
    };
    assert_eq!(t.shape, [2, 3, 3]);
    assert_eq!(t.as_u8().unwrap(), test_rgb().into_raw());
}

#[test]
fn every_image_layout_has_the_reference_shape_and_values() {
    let png = encode(&test_rgb(), ImageFormat::Png);
    let hwc = test_rgb().into_raw();
    // Channel 1 (green) of pixel (x=0, y=1) is 100.
    for (mode, shape, green_of_0_1) in [
        (ImageDecode::Rgb8, vec![2, 3, 3], 100.0),
        (ImageDecode::Rgb, vec![2, 3, 3], 100.0 / 255.0),
        (ImageDecode::TorchRgb8, vec![3, 2, 3], 100.0),
        (ImageDecode::TorchRgb, vec![3, 2, 3], 100.0 / 255.0),
        (ImageDecode::Rgba8, vec![2, 3, 4], 100.0),
        (ImageDecode::TorchRgba, vec![4, 2, 3], 100.0 / 255.0),
    ] {
        let Decoded::Image(t) = decode(image_decoder(mode), "png", &png) else { panic!() };
        assert_eq!(t.shape, shape, "{mode}");
        let chw =
            matches!(mode, ImageDecode::TorchRgb8 | ImageDecode::TorchRgb | ImageDecode::TorchRgba);
        let channels = shape[if chw { 0 } else { 2 }];
        // Element index of (c=1, y=1, x=0).
        let at = if chw { 6 + 3 } else { 3 * channels + 1 };
        let got = match &t.data {
            TensorData::U8(v) => f32::from(v[at]),
            TensorData::F32(v) => v[at],
            other => panic!("{other:?}"),
        };
        assert!((got - green_of_0_1).abs() < 1e-6, "{mode}: {got}");
        assert_eq!(t.data.len(), shape.iter().product::<usize>());
    }
    // CHW u8 is the HWC data transposed.
    let Decoded::Image(t) = decode(image_decoder(ImageDecode::TorchRgb8), "png", &png) else {
        panic!()
    };
    let v = t.as_u8().unwrap();
    for y in 0..2 {
        for x in 0..3 {
            for c in 0..3 {
                assert_eq!(v[c * 6 + y * 3 + x], hwc[(y * 3 + x) * 3 + c]);
            }
        }
    }
}

#[test]
fn grayscale_uses_pil_luma() {
    let img =
        RgbImage::from_fn(2, 1, |x, _| if x == 0 { Rgb([255, 0, 0]) } else { Rgb([10, 200, 30]) });
    let png = encode(&img, ImageFormat::Png);
    let Decoded::Image(t) = decode(image_decoder(ImageDecode::L8), "png", &png) else { panic!() };
    assert_eq!(t.shape, [1, 2]);
    // PIL: L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16.
    assert_eq!(t.as_u8().unwrap(), [76, 124]);
    let Decoded::Image(t) = decode(image_decoder(ImageDecode::TorchL8), "png", &png) else {
        panic!()
    };
    assert_eq!(t.shape, [1, 1, 2]);
}

#[test]
fn alpha_is_dropped_for_rgb_and_added_for_rgba() {
    let img = RgbaImage::from_pixel(1, 1, Rgba([1, 2, 3, 4]));
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).unwrap();
    let png = Bytes::from(out.into_inner());
    let Decoded::Image(t) = decode(rgb8(), "png", &png) else { panic!() };
    assert_eq!(t.as_u8().unwrap(), [1, 2, 3]);
    let jpg = encode(&test_rgb(), ImageFormat::Jpeg);
    let Decoded::Image(t) = decode(image_decoder(ImageDecode::Rgba8), "jpg", &jpg) else {
        panic!()
    };
    assert_eq!(t.shape, [2, 3, 4]);
    assert!(t.as_u8().unwrap().chunks(4).all(|p| p[3] == 255));
}

#[test]
fn jpeg_webp_gif_bmp_tiff_decode_whatever_the_extension_case() {
    for (format, part) in [
        (ImageFormat::Jpeg, "JPG"),
        (ImageFormat::WebP, "webp"),
        (ImageFormat::Gif, "seg.gif"),
        (ImageFormat::Bmp, "bmp"),
        (ImageFormat::Tiff, "tif"),
        // PIL reads the content, not the name: a PNG stored as .jpg decodes.
        (ImageFormat::Png, "jpeg"),
    ] {
        let Decoded::Image(t) = decode(rgb8(), part, &encode(&test_rgb(), format)) else {
            panic!("{part}")
        };
        assert_eq!(t.shape, [2, 3, 3], "{part}");
    }
}

#[test]
fn fixture_jpegs_decode_to_32x32() {
    let ds = crate::WebDataset::open(&energon_tests::ref_small_dir(), &Default::default()).unwrap();
    for i in (0..200).step_by(13) {
        let raw = ds.read(i).unwrap().unwrap();
        let Decoded::Image(t) = decode(rgb8(), "jpg", raw.part("jpg").unwrap()) else { panic!() };
        assert_eq!(t.shape, [32, 32, 3]);
        let torch = image_decoder(ImageDecode::TorchRgb);
        let Decoded::Image(t) = decode(torch, "jpg", raw.part("jpg").unwrap()) else { panic!() };
        assert_eq!(t.shape, [3, 32, 32]);
        assert!(t.as_f32().unwrap().iter().all(|v| (0.0..=1.0).contains(v)));
    }
}

#[test]
fn raw_image_mode_keeps_bytes() {
    let png = encode(&test_rgb(), ImageFormat::Png);
    assert_eq!(decode(image_decoder(ImageDecode::Raw), "png", &png), Decoded::Bytes(png));
}

#[test]
fn undecodable_images_are_errors() {
    let err = rgb8().decode("jpg", &Bytes::from_static(b"not an image")).unwrap_err();
    assert!(err.contains("not an image"), "{err}");
    let mut jpg = encode(&test_rgb(), ImageFormat::Jpeg).to_vec();
    jpg.truncate(jpg.len() / 3);
    let err = rgb8().decode("jpg", &Bytes::from(jpg)).unwrap_err();
    assert!(err.contains("invalid jpg image"), "{err}");
}

#[test]
fn text_int_and_json_follow_python() {
    assert_eq!(decode(rgb8(), "txt", &Bytes::from("héllo\n")), Decoded::Text("héllo\n".into()));
    assert_eq!(decode(rgb8(), "caption.text", &Bytes::from("x")), Decoded::Text("x".into()));
    for (text, value) in [("12", 12), (" -7\n", -7), ("+1_000", 1000), ("0", 0)] {
        assert_eq!(decode(rgb8(), "cls", &Bytes::from(text)), Decoded::Int(value), "{text:?}");
    }
    for bad in ["", "1.5", "_1", "1__0", "x", "99999999999999999999"] {
        assert!(rgb8().decode("cls", &Bytes::from(bad)).is_err(), "{bad:?}");
    }
    let Decoded::Json(v) = decode(rgb8(), "json", &Bytes::from(r#"{"b": 1, "a": [2]}"#)) else {
        panic!()
    };
    assert_eq!(v.as_object().unwrap().keys().collect::<Vec<_>>(), ["b", "a"]);
    let err = rgb8().decode("json", &Bytes::from("{bad")).unwrap_err();
    assert!(err.starts_with("invalid JSON"), "{err}");
    let err = rgb8().decode("txt", &Bytes::from_static(b"\xff\xfe")).unwrap_err();
    assert!(err.contains("UTF-8"), "{err}");
}

#[test]
fn basic_handlers_are_case_sensitive_and_unknown_parts_stay_bytes() {
    assert_eq!(decode(rgb8(), "TXT", &Bytes::from("x")), Decoded::Bytes(Bytes::from("x")));
    assert_eq!(decode(rgb8(), "pyd", &Bytes::from("x")), Decoded::Bytes(Bytes::from("x")));
    assert_eq!(decode(rgb8(), "", &Bytes::from("x")), Decoded::Bytes(Bytes::from("x")));
}

#[test]
fn gzip_parts_are_decoded_by_their_inner_name() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"{\"a\": 1}").unwrap();
    let data = Bytes::from(gz.finish().unwrap());
    assert_eq!(decode(rgb8(), "json.gz", &data), Decoded::Json(serde_json::json!({"a": 1})));
    assert!(rgb8().decode("txt.gz", &Bytes::from("not gzip")).is_err());
}

fn npy(descr: &str, fortran: bool, shape: &str, body: &[u8], version: u8) -> Bytes {
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    let prefix = if version == 1 { 10 } else { 12 };
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    Bytes::from(out)
}

#[test]
fn npy_arrays_of_every_numeric_dtype() {
    let f32s: Vec<u8> =
        [1.5f32, -2.0, 3.25, 0.0, 5.0, 6.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let Decoded::Tensor(t) = decode(rgb8(), "npy", &npy("<f4", false, "(2, 3)", &f32s, 1)) else {
        panic!()
    };
    assert_eq!(t.shape, [2, 3]);
    assert_eq!(t.as_f32().unwrap(), [1.5, -2.0, 3.25, 0.0, 5.0, 6.0]);
    let be: Vec<u8> = [1i32, -2].iter().flat_map(|v| v.to_be_bytes()).collect();
    let Decoded::Tensor(t) = decode(rgb8(), "npy", &npy(">i4", false, "(2,)", &be, 2)) else {
        panic!()
    };
    assert_eq!(t.data, TensorData::I32(vec![1, -2]));
    let Decoded::Tensor(t) = decode(rgb8(), "npy", &npy("|b1", false, "()", &[1], 3)) else {
        panic!()
    };
    assert_eq!((t.shape.len(), t.data), (0, TensorData::Bool(vec![true])));
    let Decoded::Tensor(t) = decode(rgb8(), "npy", &npy("|u1", false, "(0, 4)", &[], 1)) else {
        panic!()
    };
    assert_eq!(t.shape, [0, 4]);
}

#[test]
fn fortran_order_npy_is_reordered() {
    // [[1, 2, 3], [4, 5, 6]] stored column-major: 1 4 2 5 3 6.
    let body: Vec<u8> = [1i16, 4, 2, 5, 3, 6].iter().flat_map(|v| v.to_le_bytes()).collect();
    let Decoded::Tensor(t) = decode(rgb8(), "npy", &npy("<i2", true, "(2, 3)", &body, 1)) else {
        panic!()
    };
    assert_eq!(t.data, TensorData::I16(vec![1, 2, 3, 4, 5, 6]));
}

#[test]
fn bad_npy_is_an_error() {
    assert!(rgb8().decode("npy", &Bytes::from("nope")).is_err());
    let err = rgb8().decode("npy", &npy("<f4", false, "(4,)", &[0; 8], 1)).unwrap_err();
    assert!(err.contains("truncated"), "{err}");
    let err = rgb8().decode("npy", &npy("<c8", false, "(1,)", &[0; 8], 1)).unwrap_err();
    assert!(err.contains("dtype"), "{err}");
    let err = rgb8().decode("npy", &npy("|O", false, "(1,)", &[0; 8], 1)).unwrap_err();
    assert!(err.contains("dtype"), "{err}");
}

/// A 16-bit PCM WAV file.
fn wav(rate: u32, channels: u16, frames: &[i16]) -> Bytes {
    let data_len = (frames.len() * 2) as u32;
    let mut out = Vec::new();
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
    out.extend_from_slice(&(channels * 2).to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for v in frames {
        out.extend_from_slice(&v.to_le_bytes());
    }
    Bytes::from(out)
}

#[test]
fn wav_decodes_to_planar_f32_with_its_rate() {
    // Interleaved stereo: L = 0, 16384, R = -32768, 8192.
    let data = wav(22050, 2, &[0, -32768, 16384, 8192]);
    let Decoded::Audio(a) = decode(rgb8(), "wav", &data) else { panic!() };
    assert_eq!((a.sample_rate, a.channels(), a.frames()), (22050, 2, 2));
    assert_eq!(a.samples.as_f32().unwrap(), [0.0, 0.5, -1.0, 0.25]);
}

#[test]
fn flac_mp3_and_ogg_decode() {
    for (name, rate, channels, min_frames) in
        [("tone.flac", 8000, 1, 800), ("tone.mp3", 16000, 2, 1600), ("tone.ogg", 8000, 1, 700)]
    {
        let ext = name.rsplit('.').next().unwrap();
        let Decoded::Audio(a) = decode(rgb8(), ext, &data_file(name)) else { panic!("{name}") };
        assert_eq!((a.sample_rate, a.channels()), (rate, channels), "{name}");
        assert!(a.frames() >= min_frames && a.frames() < min_frames * 2, "{name}: {}", a.frames());
        let peak = a.samples.as_f32().unwrap().iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(peak > 0.05 && peak <= 1.0, "{name}: {peak}");
    }
}

#[test]
fn bad_audio_is_an_error_and_raw_av_keeps_bytes() {
    let err = rgb8().decode("flac", &Bytes::from_static(b"not audio at all")).unwrap_err();
    assert!(!err.is_empty());
    let err = rgb8().decode("wav", &wav(0, 1, &[1, 2])).unwrap_err();
    // FFmpeg does not open a WAV of rate 0; symphonia opens it and finds the rate.
    assert!(err.contains("sample rate 0") || err.contains("cannot open"), "{err}");
    let raw = Decoder { av: AvDecode::Raw, ..Decoder::default() };
    let Decoded::Video(v) = decode(raw, "wav", &wav(8000, 1, &[1])) else { panic!() };
    assert_eq!(v.format, "wav");
}

#[test]
fn video_stays_raw_with_a_clear_message() {
    let data = data_file("clip.mp4");
    let Decoded::Video(v) = decode(rgb8(), "mp4", &data) else { panic!() };
    assert_eq!((v.format.as_str(), v.data.len()), ("mp4", data.len()));
    assert!(v.to_string().contains("raw bytes"), "{v}");
    assert!(Decoded::Video(v).summary().contains("not decoded"));
}

#[test]
fn frames_mode_decodes_the_av_list_whole_and_keeps_ogg_bytes() {
    let frames = |with_audio| Decoder { av: AvDecode::Frames { with_audio }, ..Decoder::default() };
    let ogg = Bytes::from_static(b"OggS not decoded");
    assert_eq!(decode(frames(false), "ogg", &ogg), Decoded::Bytes(ogg.clone()));
    #[cfg(feature = "video")]
    {
        let mp4 = Bytes::from(
            std::fs::read(energon_fixtures::fixtures_dir().join("av/h264_aac.mp4")).unwrap(),
        );
        let Decoded::Av(Some(av)) = decode(frames(false), "mp4", &mp4) else { panic!() };
        assert_eq!((av.video_clips.len(), av.audio_clips.len()), (1, 0));
        assert!(av.video_clips[0].frames > 1);
        let Decoded::Av(Some(av)) = decode(frames(true), "MP4", &mp4) else { panic!() };
        assert_eq!((av.video_clips.len(), av.audio_clips.len()), (1, 1));
        // A file type that is not recognized has no frames (the reference's `None`).
        let junk = Bytes::from_static(b"not a video");
        assert_eq!(decode(frames(false), "mkv", &junk), Decoded::Av(None));
    }
    #[cfg(not(feature = "video"))]
    {
        let err = frames(false).decode("mp4", &data_file("clip.mp4")).unwrap_err();
        assert!(err.contains("`video` feature"), "{err}");
    }
}

#[test]
fn guess_content_uses_magic_bytes_for_media_only() {
    let guess = Decoder { guess_content: true, ..Decoder::default() };
    let png = encode(&test_rgb(), ImageFormat::Png);
    assert!(matches!(decode(guess, "bin", &png), Decoded::Image(_)));
    assert!(matches!(decode(guess, "x", &wav(8000, 1, &[1, 2])), Decoded::Audio(_)));
    assert!(matches!(decode(guess, "dat", &data_file("clip.mp4")), Decoded::Video(_)));
    assert_eq!(decode(guess, "txt", &Bytes::from("plain")), Decoded::Text("plain".into()));
    assert!(matches!(decode(rgb8(), "bin", &png), Decoded::Bytes(_)));
}

#[test]
fn part_kinds_and_mode_names() {
    assert_eq!(PartKind::of("seg.PNG"), PartKind::Image);
    assert_eq!(PartKind::of("json.gz"), PartKind::Json);
    assert_eq!(PartKind::of("MP4"), PartKind::Video);
    assert_eq!(PartKind::of("x.WAV"), PartKind::Audio);
    assert_eq!(PartKind::of("psd"), PartKind::Image);
    assert_eq!(PartKind::of("cls2"), PartKind::Int);
    for (name, mode) in ImageDecode::ALL {
        assert_eq!(name.parse::<ImageDecode>().unwrap(), mode);
        assert_eq!(mode.to_string(), name);
    }
    assert_eq!("torch".parse::<ImageDecode>().unwrap(), ImageDecode::TorchRgb);
    assert!("pil".parse::<ImageDecode>().is_err());
}
