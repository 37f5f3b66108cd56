//! Probing single entries: images, audio, filters, sniffing.

use image::{ColorType, ImageFormat};

use crate::media::{
    AvMetadata, AvSource, HeaderError, ImageMetadata, MediaFilter, MediaStrategy, MediaType,
    probe_av, probe_image, synth,
};

fn img(format: ImageFormat, color: ColorType) -> Vec<u8> {
    synth::image(format, color, 5, 3).unwrap()
}

fn meta(width: u32, height: u32, format: &str, mode: &str) -> ImageMetadata {
    ImageMetadata { width, height, format: format.into(), mode: mode.into() }
}

fn av(name: &str, data: &[u8]) -> Result<AvMetadata, String> {
    probe_av(name, AvSource { data, file: None })
}

/// A PNG chunk with its CRC.
fn chunk(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(body);
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(&crc.sum().to_be_bytes());
    out
}

/// A PNG with the given IHDR bit depth and color type (and a palette for type 3); the image
/// data is a valid zlib stream of zero bytes.
fn png(depth: u8, color: u8, palette: &[u8]) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = 7u32.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&2u32.to_be_bytes());
    ihdr.extend_from_slice(&[depth, color, 0, 0, 0]);
    out.extend(chunk(b"IHDR", &ihdr));
    if !palette.is_empty() {
        out.extend(chunk(b"PLTE", palette));
    }
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut z, &[0u8; 64]).unwrap();
    out.extend(chunk(b"IDAT", &z.finish().unwrap()));
    out.extend(chunk(b"IEND", &[]));
    out
}

#[test]
fn png_modes_follow_pillow() {
    let cases: [(u8, u8, &[u8], &str); 10] = [
        (1, 0, &[], "1"),
        (2, 0, &[], "L"),
        (8, 0, &[], "L"),
        (16, 0, &[], "I;16"),
        (8, 2, &[], "RGB"),
        (16, 2, &[], "RGB"),
        (4, 3, &[0, 0, 0, 9, 9, 9], "P"),
        (8, 4, &[], "LA"),
        (16, 4, &[], "RGBA"),
        (8, 6, &[], "RGBA"),
    ];
    for (depth, color, palette, mode) in cases {
        let got = probe_image(&png(depth, color, palette));
        assert_eq!(got, Ok(meta(7, 2, "PNG", mode)), "depth {depth} color {color}");
    }
    // Encoded by the image crate, through its own decoder.
    for (color, mode) in [(ColorType::L8, "L"), (ColorType::La8, "LA"), (ColorType::Rgba8, "RGBA")]
    {
        assert_eq!(probe_image(&img(ImageFormat::Png, color)), Ok(meta(5, 3, "PNG", mode)));
    }
}

#[test]
fn other_formats_and_modes() {
    let cases = [
        (ImageFormat::Jpeg, ColorType::L8, "JPEG", "L"),
        (ImageFormat::Jpeg, ColorType::Rgb8, "JPEG", "RGB"),
        (ImageFormat::Gif, ColorType::Rgba8, "GIF", "P"),
        (ImageFormat::Bmp, ColorType::Rgb8, "BMP", "RGB"),
        (ImageFormat::Bmp, ColorType::Rgba8, "BMP", "RGBA"),
        (ImageFormat::Bmp, ColorType::L8, "BMP", "L"),
        (ImageFormat::Tiff, ColorType::L8, "TIFF", "L"),
        (ImageFormat::Tiff, ColorType::Rgb8, "TIFF", "RGB"),
        (ImageFormat::Tiff, ColorType::Rgba8, "TIFF", "RGBA"),
        (ImageFormat::Tiff, ColorType::L16, "TIFF", "I;16"),
        (ImageFormat::WebP, ColorType::Rgba8, "WEBP", "RGBA"),
        (ImageFormat::WebP, ColorType::Rgb8, "WEBP", "RGB"),
    ];
    for (format, color, name, mode) in cases {
        assert_eq!(
            probe_image(&img(format, color)),
            Ok(meta(5, 3, name, mode)),
            "{format:?} {color:?}"
        );
    }
}

#[test]
fn the_reference_fixture_jpegs() {
    // The reference stored {"width":32,"height":32,"format":"JPEG","mode":"RGB"} for them.
    let data =
        std::fs::read(energon_tests::ref_small_dir().join("shards/data-000000.tar")).unwrap();
    let mut archive = tar::Archive::new(&data[..]);
    let mut n = 0;
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().extension().is_some_and(|e| e == "jpg") {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            assert_eq!(probe_image(&bytes), Ok(meta(32, 32, "JPEG", "RGB")));
            n += 1;
        }
    }
    assert_eq!(n, 50);
}

/// A GIF with a global palette of `n` entries and one 2x2 image at (1, 1).
fn gif(palette: &[u8], local: Option<&[u8]>) -> Vec<u8> {
    let bits = (palette.len() / 3).trailing_zeros() as u8 - 1;
    let mut out = b"GIF89a".to_vec();
    out.extend_from_slice(&[2, 0, 2, 0, 0x80 | bits, 0, 0]);
    out.extend_from_slice(palette);
    out.extend_from_slice(&[b'!', 0xf9, 4, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&[b',', 1, 0, 1, 0, 2, 0, 2, 0]);
    match local {
        Some(p) => {
            out.push(0x80 | ((p.len() / 3).trailing_zeros() as u8 - 1));
            out.extend_from_slice(p);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&[2, 2, 0x4c, 0x01, 0, b';']);
    out
}

#[test]
fn gif_mode_and_size_follow_pillow() {
    let ramp = [0, 0, 0, 1, 1, 1];
    let colors = [0, 0, 0, 255, 0, 0];
    let probe = |data: Vec<u8>| probe_image(&data).map(|m| (m.width, m.height, m.mode));
    // The first frame's extent (1..3) grows the 2x2 screen to 3x3, as Pillow does.
    assert_eq!(probe(gif(&colors, None)), Ok((3, 3, "P".into())));
    assert_eq!(probe(gif(&ramp, None)), Ok((3, 3, "L".into())));
    assert_eq!(probe(gif(&ramp, Some(&colors))), Ok((3, 3, "P".into())));
    assert_eq!(probe(gif(&colors, Some(&ramp))), Ok((3, 3, "L".into())));
}

#[test]
fn hand_made_headers_ico_jpeg2000_jpeg_cmyk() {
    // ICO with a 16x16 BMP entry and a 48x32 PNG entry: the larger one wins.
    let png_entry = png(8, 2, &[]);
    let mut ico = vec![0, 0, 1, 0, 2, 0];
    ico.extend_from_slice(&[16, 16, 0, 0, 1, 0, 32, 0]);
    ico.extend_from_slice(&40u32.to_le_bytes());
    ico.extend_from_slice(&38u32.to_le_bytes());
    ico.extend_from_slice(&[48, 32, 0, 0, 1, 0, 32, 0]);
    ico.extend_from_slice(&(png_entry.len() as u32).to_le_bytes());
    ico.extend_from_slice(&78u32.to_le_bytes());
    ico.extend_from_slice(&[0; 40]);
    ico.extend_from_slice(&png_entry);
    assert_eq!(probe_image(&ico), Ok(meta(7, 2, "ICO", "RGB")));
    ico[12..14].copy_from_slice(&[64, 0]); // The BMP entry is now 16x16 at 64 bpp, still smaller.
    ico[6] = 255;
    ico[7] = 255; // ...and now 255x255, larger: BMP images are RGBA.
    assert_eq!(probe_image(&ico), Ok(meta(255, 255, "ICO", "RGBA")));

    let mut jp2 = vec![0, 0, 0, 0x0c, b'j', b'P', b' ', b' ', 0x0d, 0x0a, 0x87, 0x0a];
    jp2.extend_from_slice(&[
        0, 0, 0, 20, b'f', b't', b'y', b'p', b'j', b'p', b'2', b' ', 0, 0, 0, 0, b'j', b'p', b'2',
        b' ',
    ]);
    jp2.extend_from_slice(&[
        0, 0, 0, 30, b'j', b'p', b'2', b'h', 0, 0, 0, 22, b'i', b'h', b'd', b'r',
    ]);
    jp2.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 11, 0, 3, 7, 7, 0, 0]);
    assert_eq!(probe_image(&jp2), Ok(meta(11, 9, "JPEG2000", "RGB")));

    let mut j2k = vec![0xff, 0x4f, 0xff, 0x51, 0, 41, 0, 0];
    for v in [20u32, 10, 4, 2, 20, 10, 0, 0] {
        j2k.extend_from_slice(&v.to_be_bytes());
    }
    j2k.extend_from_slice(&[0, 1, 15, 1, 1]);
    assert_eq!(probe_image(&j2k), Ok(meta(16, 8, "JPEG2000", "I;16")));

    // JPEG frame headers: the component count decides the mode.
    for (n, mode) in [(1u8, Ok("L")), (3, Ok("RGB")), (4, Ok("CMYK")), (2, Err(()))] {
        let mut jpeg =
            vec![0xff, 0xd8, 0xff, 0xe0, 0, 4, 0, 0, 0xff, 0xff, 0xc2, 0, 11, 8, 0, 2, 0, 3, n];
        jpeg.extend_from_slice(&[1, 0x11, 0, 0xff, 0xd9]);
        assert_eq!(
            crate::media::image::jpeg_header(&jpeg).map(|h| h.2).map_err(drop),
            mode.map_err(drop),
            "{n}"
        );
    }
}

#[test]
fn bad_images_are_reasons_not_panics() {
    let good = img(ImageFormat::Png, ColorType::Rgb8);
    let jpeg = img(ImageFormat::Jpeg, ColorType::Rgb8);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"hello, world".to_vec(), "not an image"),
        (Vec::new(), "not an image"),
        (good[..20].to_vec(), "PNG"),
        (jpeg[..4].to_vec(), "JPEG"),
        (vec![0, 0, 1, 0, 1, 0], "ICO"),
        (vec![0xff, 0x4f, 0xff, 0x51, 0], "JPEG 2000"),
        (b"GIF89a\x01\x00".to_vec(), "GIF"),
        (b"BM\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0".to_vec(), "BMP"),
    ];
    for (data, want) in cases {
        let err = probe_image(&data).unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
    // Which kind of failure it is, typed.
    let cut = probe_image(&good[..20]);
    assert!(matches!(cut, Err(HeaderError::Unreadable { format: "PNG", .. })), "{cut:?}");
    assert_eq!(probe_image(&[0, 0, 1, 0, 1, 0]), Err(HeaderError::Truncated("ICO header")));
    assert!(matches!(probe_image(b"hello, world"), Err(HeaderError::Unsupported(_))));
    // Any prefix of a valid image gives a result or a reason, never a panic.
    for data in [
        &good,
        &jpeg,
        &img(ImageFormat::Gif, ColorType::Rgba8),
        &img(ImageFormat::Bmp, ColorType::L8),
    ] {
        for len in 0..data.len() {
            let _ = probe_image(&data[..len]);
        }
    }
}

#[test]
fn wav_and_flac_audio() {
    let wav = synth::wav(2, 16000, 24000);
    let want = AvMetadata {
        audio_duration: Some(1.5),
        audio_channels: Some(2),
        audio_sample_rate: Some(16000),
        audio_num_samples: Some(24000),
        ..AvMetadata::default()
    };
    assert_eq!(av("a.wav", &wav), Ok(want.clone()));
    // The container is found from the content; the name is only a hint.
    assert_eq!(av("a.bin", &wav), Ok(want.clone()));
    // This FLAC's frames carry no durations and its last frame no timestamp: the reference's
    // FFmpeg ends the audio at the last timestamped frame (1.368 s, as recorded from it);
    // symphonia, without FFmpeg, counts every sample.
    let flac_duration = if cfg!(feature = "video") { 1.368 } else { 1.5 };
    let want = AvMetadata { audio_duration: Some(flac_duration), ..want };
    assert_eq!(av("x.flac", &synth::flac(2, 16000, 24000)), Ok(want));
    let mono = av("m.flac", &synth::flac(1, 44100, 1000));
    if cfg!(feature = "video") {
        // A single-frame FLAC without a seek table: the reference's FFmpeg cannot seek to its
        // start ("Operation not permitted", recorded from it), and neither can ours.
        assert!(mono.as_ref().is_err_and(|e| e.contains("cannot seek")), "{mono:?}");
        return;
    }
    let mono = mono.unwrap();
    assert_eq!(mono.audio_channels, Some(1));
    assert_eq!(mono.audio_num_samples, Some(1000));
    // Python: 1000 * float(Fraction(1, 44100)).
    assert_eq!(mono.audio_duration, Some(1000.0 * (1.0 / 44100.0)));
    assert_eq!(mono.audio_duration, Some(0.022675736961451247));
}

#[test]
fn bad_audio_is_a_reason() {
    let wav = synth::wav(1, 8000, 800);
    for (name, data) in
        [("a.wav", &wav[..30]), ("a.wav", &b"RIFF....WAVEjunk"[..]), ("a.mp3", &b""[..])]
    {
        assert!(av(name, data).is_err(), "{name} {}", data.len());
    }
    #[cfg(not(feature = "video"))]
    {
        let err = av("v.mp4", b"\0\0\0\x18ftypisom").unwrap_err();
        assert!(err.contains("feature `video`"), "{err}");
    }
}

#[test]
fn filters_choose_entries_like_the_reference() {
    let ext = MediaFilter::from_flags(None, false, true).unwrap();
    assert_eq!(ext.strategy(), MediaStrategy::Extension);
    assert!(ext.considers("a/b.JPG") && ext.considers("x.seg.png") && ext.considers("k.wav"));
    assert!(
        !ext.considers("a.txt")
            && !ext.considers(".jpg")
            && !ext.considers("jpg")
            && !ext.considers("a.jpg.")
    );
    assert_eq!(ext.media_type("k.flac", b"whatever"), Some(MediaType::Av));
    assert_eq!(ext.media_type("k.tiff", b""), Some(MediaType::Image));
    assert_eq!(ext.media_type("k.json", b"\x89PNG"), None);

    let header = MediaFilter::from_flags(None, true, false).unwrap();
    assert!(header.considers("anything"));
    assert_eq!(header.media_type("k.bin", b"\x89PNG\r\n"), Some(MediaType::Image));
    assert_eq!(header.media_type("k.bin", b"RIFF\0\0\0\0WAVEfmt "), Some(MediaType::Av));
    // An ISO file counts only with its whole `ftyp` box (as `filetype` 1.2 reads it).
    let mp4 = b"\0\0\0\x18ftypisom\0\0\0\0mp41avc1";
    assert_eq!(header.media_type("k.bin", mp4), Some(MediaType::Av));
    assert_eq!(header.media_type("k.bin", &mp4[..12]), None);
    let avif = b"\0\0\0\x18ftypavif\0\0\0\0mif1avif";
    assert_eq!(header.media_type("k.bin", avif), Some(MediaType::Image));
    assert_eq!(
        header.media_type("k.jpg", b"plain text"),
        Some(MediaType::Image),
        "extension fallback"
    );
    assert_eq!(header.media_type("k.txt", b"plain text"), None);

    let glob = MediaFilter::from_flags(Some("*.jpg,img_*"), false, false).unwrap();
    assert_eq!(glob.patterns_joined(), "*.jpg,img_*");
    assert!(glob.considers("A.JPG") && glob.considers("img_1.dat") && !glob.considers("a.png"));
    assert_eq!(glob.media_type("img_1.dat", b"fLaC"), Some(MediaType::Av));
    assert_eq!(glob.media_type("img_1.dat", b"nothing"), None);
    assert_eq!(glob.media_type("a.png", b"\x89PNG"), None);

    for (g, h, e) in [
        (None, false, false),
        (Some("*"), true, false),
        (None, true, true),
        (Some(""), false, false),
    ] {
        let err = MediaFilter::from_flags(g, h, e).unwrap_err();
        assert!(err.to_string().contains("exactly one"), "{err}");
    }
}
