//! Tests of the decoder limits (Pillow's pixel limit, the gzip size limit) and of corrupt audio,
//! on real files made here: a 1-bit PNG bomb, a gzip bomb, a FLAC with a flipped bit, a cut MP3.

use bytes::Bytes;
use flate2::{Compress, Compression, Crc, FlushCompress};

use super::{DecodeError, DecodeLimits, Decoded, Decoder, Limit, image::check_pixels};

/// Raw deflate data of `chunks` x `chunk` zero bytes, made without compressing them all: each
/// chunk is compressed after a full flush (which resets the compressor), so every chunk's
/// output is the same bytes.
fn deflate_zeros(chunk: usize, chunks: usize) -> Vec<u8> {
    let mut c = Compress::new(Compression::best(), false);
    let mut block = Vec::with_capacity(chunk);
    c.compress_vec(&vec![0u8; chunk], &mut block, FlushCompress::Full).unwrap();
    assert_eq!(c.total_in(), chunk as u64);
    let mut out = block.repeat(chunks);
    let mut end = Vec::with_capacity(64);
    Compress::new(Compression::best(), false)
        .compress_vec(&[], &mut end, FlushCompress::Finish)
        .unwrap();
    out.extend(end);
    out
}

/// A gzip file of `chunks` x `chunk` zero bytes, with its CRC and length trailer.
fn gzip_zeros(chunk: usize, chunks: usize) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255];
    out.extend(deflate_zeros(chunk, chunks));
    let mut one = Crc::new();
    one.update(&vec![0u8; chunk]);
    let mut crc = Crc::new();
    for _ in 0..chunks {
        crc.combine(&one);
    }
    out.extend(crc.sum().to_le_bytes());
    out.extend(((chunk * chunks) as u32).to_le_bytes());
    out
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
    out.extend((data.len() as u32).to_be_bytes());
    let mut crc = Crc::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend(crc.sum().to_be_bytes());
}

/// A valid black 1-bit grayscale PNG of `side` x `side` pixels (`side` a multiple of 8).
pub(crate) fn black_png(side: u32) -> Vec<u8> {
    let row = 1 + side as usize / 8;
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = side.to_be_bytes().to_vec();
    ihdr.extend(side.to_be_bytes());
    ihdr.extend([1, 0, 0, 0, 0]);
    png_chunk(&mut out, b"IHDR", &ihdr);
    // zlib: header, deflate data of the all-zero rows (filter 0, black), Adler-32 of zeros.
    let (rows_per_chunk, rows) = (side as usize / 50, side as usize);
    let mut zlib = vec![0x78, 0xda];
    zlib.extend(deflate_zeros(row * rows_per_chunk, rows / rows_per_chunk));
    let n = (row * rows) as u64;
    zlib.extend((((n % 65521) << 16 | 1) as u32).to_be_bytes());
    png_chunk(&mut out, b"IDAT", &zlib);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

#[test]
fn a_png_bomb_is_refused_from_its_header() {
    let bomb = Bytes::from(black_png(20000));
    assert!(bomb.len() < 100_000, "{}", bomb.len());
    let start = std::time::Instant::now();
    let err = Decoder::default().try_decode("png", &bomb).unwrap_err();
    let DecodeError::TooLarge { limit, reason } = &err else { panic!("{err}") };
    assert_eq!(*limit, Limit::ImagePixels);
    assert!(reason.contains("20000x20000 = 400000000 pixels"), "{reason}");
    assert!(reason.contains("178956970"), "{reason}");
    assert!(start.elapsed().as_secs() < 2, "{:?}", start.elapsed());
    // The same file is a real image: with a limit it is within, it decodes.
    let small = Bytes::from(black_png(400));
    let Decoded::Image(t) = Decoder::default().try_decode("png", &small).unwrap() else { panic!() };
    assert_eq!(t.shape, [400, 400, 3]);
    assert!(t.as_u8().unwrap().iter().all(|&v| v == 0));
}

#[test]
fn the_pixel_limit_is_pillows_rule() {
    let max = Some(DecodeLimits::PILLOW_MAX_IMAGE_PIXELS);
    // Twice the limit is allowed (with a warning), one pixel more is not.
    assert!(check_pixels("png", 178_956_970, 1, max).is_ok());
    assert!(check_pixels("png", 178_956_971, 1, max).is_err());
    assert!(check_pixels("png", 13_377, 13_377, max).is_ok());
    assert!(check_pixels("png", 13_378, 13_377, max).is_err());
    // A zero side counts as one; no limit refuses nothing.
    assert!(check_pixels("png", 178_956_971, 0, max).is_err());
    assert!(check_pixels("png", 65_535, 65_535, None).is_ok());
}

/// Every image format, JPEG included, is checked before decoding, against the configured limit.
#[test]
fn a_smaller_limit_applies_to_every_format() {
    let decoder = Decoder {
        limits: DecodeLimits { max_image_pixels: Some(50), ..DecodeLimits::default() },
        ..Decoder::default()
    };
    for (format, ext) in [
        (image::ImageFormat::Png, "png"),
        (image::ImageFormat::Jpeg, "jpg"),
        (image::ImageFormat::Gif, "gif"),
        (image::ImageFormat::Bmp, "bmp"),
        (image::ImageFormat::Tiff, "tiff"),
        (image::ImageFormat::WebP, "webp"),
    ] {
        let ok = crate::media::synth::image(format, image::ColorType::Rgb8, 10, 10).unwrap();
        let Decoded::Image(t) = decoder.try_decode(ext, &Bytes::from(ok)).unwrap() else {
            panic!("{ext}")
        };
        assert_eq!(t.shape, [10, 10, 3], "{ext}");
        let big = crate::media::synth::image(format, image::ColorType::Rgb8, 11, 10).unwrap();
        let err = decoder.try_decode(ext, &Bytes::from(big)).unwrap_err();
        assert!(
            matches!(&err, DecodeError::TooLarge { limit: Limit::ImagePixels, reason }
                if reason.contains("11x10 = 110 pixels")),
            "{ext}: {err}"
        );
    }
}

#[test]
fn a_gzip_bomb_stops_at_the_limit() {
    // About 2 MB inflating to 2 GiB.
    let bomb = Bytes::from(gzip_zeros(1 << 20, 2048));
    assert!(bomb.len() < 3_000_000, "{}", bomb.len());
    let err = Decoder::default().try_decode("npy.gz", &bomb).unwrap_err();
    let DecodeError::TooLarge { limit, reason } = &err else { panic!("{err}") };
    assert_eq!(*limit, Limit::GunzippedBytes);
    assert!(reason.contains(&format!("limit of {} bytes", 256 << 20)), "{reason}");
    // A configured limit; within it the part decodes (here as bytes).
    let small = Bytes::from(gzip_zeros(1 << 16, 16));
    let limited = |max| Decoder {
        limits: DecodeLimits { max_gunzipped_bytes: Some(max), ..DecodeLimits::default() },
        ..Decoder::default()
    };
    let Decoded::Bytes(b) = limited(1 << 20).try_decode("bin.gz", &small).unwrap() else {
        panic!()
    };
    assert_eq!(b.len(), 1 << 20);
    assert!(matches!(
        limited((1 << 20) - 1).try_decode("bin.gz", &small),
        Err(DecodeError::TooLarge { limit: Limit::GunzippedBytes, .. })
    ));
    let unlimited = Decoder {
        limits: DecodeLimits { max_gunzipped_bytes: None, ..DecodeLimits::default() },
        ..Decoder::default()
    };
    assert!(unlimited.try_decode("bin.gz", &small).is_ok());
}

fn data_file(name: &str) -> Bytes {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    Bytes::from(std::fs::read(path).unwrap())
}

#[test]
fn flac_with_a_flipped_bit_is_an_error() {
    for flac in [data_file("tone.flac"), Bytes::from(crate::media::synth::flac(2, 8000, 4000))] {
        let Decoded::Audio(a) = Decoder::default().try_decode("flac", &flac).unwrap() else {
            panic!()
        };
        let frames = a.frames();
        // Flip one bit in each byte of the second half of the file (frame data), one at a time.
        let mut failures = 0;
        for pos in (flac.len() / 2..flac.len()).step_by(97) {
            let mut bad = flac.to_vec();
            bad[pos] ^= 0x10;
            match Decoder::default().try_decode("flac", &Bytes::from(bad)) {
                Err(DecodeError::Invalid(reason)) => {
                    assert!(!reason.is_empty());
                    failures += 1;
                }
                Ok(Decoded::Audio(a)) => assert_eq!(a.frames(), frames, "byte {pos}"),
                other => panic!("byte {pos}: {other:?}"),
            }
        }
        assert!(failures > 0);
    }
}

/// A cut FLAC is always an error (it declares its length); a cut MP3 without a frame count is
/// one when it decodes to nothing or cannot be opened (cut inside its first frames), and
/// otherwise decodes to what is left.
#[test]
fn a_cut_mp3_or_flac_is_an_error() {
    let flac = Bytes::from(crate::media::synth::flac(2, 8000, 4000));
    for (name, data) in [("tone.mp3", data_file("tone.mp3")), ("synth.flac", flac)] {
        let ext = name.rsplit('.').next().unwrap();
        let mut corrupt = 0;
        for cut in (200..data.len() * 9 / 10).step_by(211) {
            match Decoder::default().try_decode(ext, &data.slice(..cut)) {
                Err(DecodeError::Invalid(reason)) => {
                    // Short of samples, a frame cut midway, or no stream left to open.
                    let reasons = [
                        "corrupt audio",
                        "cannot decode",
                        "cannot open",
                        "cannot read",
                        "not a readable",
                    ];
                    assert!(reasons.iter().any(|r| reason.contains(r)), "{name}: {reason}");
                    corrupt += 1;
                }
                Ok(Decoded::Audio(a)) if ext == "mp3" => assert!(a.frames() > 0),
                other => panic!("{name} cut at {cut}: {other:?}"),
            }
        }
        assert!(corrupt > 0, "{name}");
    }
}
