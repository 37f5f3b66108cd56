//! Small synthetic media files with known properties, for tests, examples and benchmarks:
//! PCM WAV, FLAC (verbatim subframes), images in any format the `image` crate writes (JPEG only
//! where its `jpeg` feature is on, as in this workspace's tests), and (with the cargo feature
//! `video`) an MPEG-4 video.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat};

/// The sample at frame `i` of channel `c`: a deterministic saw tooth.
fn sample(i: u32, c: u16) -> i16 {
    let v = (i.wrapping_mul(37).wrapping_add(u32::from(c) * 1000)) % 20000;
    (v as i32 - 10000) as i16
}

/// A 16-bit PCM WAV file with `frames` samples per channel.
pub fn wav(channels: u16, sample_rate: u32, frames: u32) -> Vec<u8> {
    let data_len = frames * u32::from(channels) * 2;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&channels.to_le_bytes());
    out.extend_from_slice(&sample_rate.to_le_bytes());
    out.extend_from_slice(&(sample_rate * u32::from(channels) * 2).to_le_bytes());
    out.extend_from_slice(&(channels * 2).to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    for i in 0..frames {
        for c in 0..channels {
            out.extend_from_slice(&sample(i, c).to_le_bytes());
        }
    }
    out
}

fn crc8(data: &[u8]) -> u8 {
    let mut crc = 0u8;
    for &b in data {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 { (crc << 1) ^ 0x07 } else { crc << 1 };
        }
    }
    crc
}

fn crc16(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &b in data {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x8005 } else { crc << 1 };
        }
    }
    crc
}

/// A 16-bit FLAC file with `frames` samples per channel (1 to 8 channels), in blocks of 1152
/// samples stored verbatim.
pub fn flac(channels: u16, sample_rate: u32, frames: u32) -> Vec<u8> {
    const BLOCK: u32 = 1152;
    let channels = channels.clamp(1, 8);
    let mut out = b"fLaC".to_vec();
    // STREAMINFO, the last metadata block.
    out.extend_from_slice(&[0x80, 0, 0, 34]);
    out.extend_from_slice(&(BLOCK as u16).to_be_bytes());
    out.extend_from_slice(&(BLOCK as u16).to_be_bytes());
    out.extend_from_slice(&[0; 6]);
    let packed: u64 = (u64::from(sample_rate) << 44)
        | (u64::from(channels - 1) << 41)
        | (15u64 << 36)
        | u64::from(frames);
    out.extend_from_slice(&packed.to_be_bytes());
    out.extend_from_slice(&[0; 16]);
    let mut start = 0;
    let mut number = 0u32;
    while start < frames {
        let n = BLOCK.min(frames - start);
        let mut frame = vec![0xff, 0xf8, 0x70, ((channels - 1) as u8) << 4 | 0x08];
        push_utf8_number(&mut frame, number);
        frame.extend_from_slice(&((n - 1) as u16).to_be_bytes());
        frame.push(crc8(&frame));
        for c in 0..channels {
            frame.push(0x02);
            for i in start..start + n {
                frame.extend_from_slice(&sample(i, c).to_be_bytes());
            }
        }
        let crc = crc16(&frame);
        frame.extend_from_slice(&crc.to_be_bytes());
        out.extend_from_slice(&frame);
        start += n;
        number += 1;
    }
    out
}

/// Appends a frame number in FLAC's UTF-8-like coding.
fn push_utf8_number(out: &mut Vec<u8>, n: u32) {
    let mut buf = [0u8; 4];
    let c = char::from_u32(n).unwrap_or('\u{fffd}');
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// An image of `width` x `height` in `format` and the color type `color`, from a deterministic
/// pattern, encoded by the `image` crate; an error when the encoder does not take that color
/// type.
pub fn image(
    format: ImageFormat,
    color: image::ColorType,
    width: u32,
    height: u32,
) -> Result<Vec<u8>, String> {
    let mut rgba = image::RgbaImage::new(width, height);
    for (x, y, p) in rgba.enumerate_pixels_mut() {
        *p = image::Rgba([(x * 16) as u8, (y * 16) as u8, ((x + y) * 8) as u8, 200]);
    }
    let img: DynamicImage = match color {
        image::ColorType::L8 => DynamicImage::ImageRgba8(rgba).to_luma8().into(),
        image::ColorType::La8 => DynamicImage::ImageRgba8(rgba).to_luma_alpha8().into(),
        image::ColorType::Rgb8 => DynamicImage::ImageRgba8(rgba).to_rgb8().into(),
        image::ColorType::L16 => DynamicImage::ImageRgba8(rgba).to_luma16().into(),
        image::ColorType::La16 => DynamicImage::ImageRgba8(rgba).to_luma_alpha16().into(),
        image::ColorType::Rgb16 => DynamicImage::ImageRgba8(rgba).to_rgb16().into(),
        image::ColorType::Rgba16 => DynamicImage::ImageRgba8(rgba).to_rgba16().into(),
        _ => DynamicImage::ImageRgba8(rgba),
    };
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, format).map_err(|e| e.to_string())?;
    Ok(out.into_inner())
}

/// Writes an MPEG-4 Part 2 video of `frames` frames at `fps` frames per second to `path` (the
/// container follows the extension: `.mp4`, `.mkv`, `.avi`, ...).
#[cfg(feature = "video")]
pub fn video(
    path: &std::path::Path,
    width: u32,
    height: u32,
    frames: i64,
    fps: i32,
) -> Result<(), String> {
    use ffmpeg::{Rational, codec, format::Pixel, frame};
    use ffmpeg_next as ffmpeg;

    let err = |e: ffmpeg::Error| e.to_string();
    crate::av::init();
    let mut octx = ffmpeg::format::output(&path).map_err(err)?;
    let codec = ffmpeg::encoder::find(codec::Id::MPEG4).ok_or("no MPEG-4 encoder")?;
    let global_header = octx.format().flags().contains(ffmpeg::format::flag::Flags::GLOBAL_HEADER);
    let mut ost = octx.add_stream(codec).map_err(err)?;
    let mut enc = codec::context::Context::new_with_codec(codec).encoder().video().map_err(err)?;
    let time_base = Rational::new(1, fps);
    enc.set_width(width);
    enc.set_height(height);
    enc.set_format(Pixel::YUV420P);
    enc.set_time_base(time_base);
    enc.set_frame_rate(Some(Rational::new(fps, 1)));
    if global_header {
        enc.set_flags(codec::Flags::GLOBAL_HEADER);
    }
    let mut encoder = enc.open_as(codec).map_err(err)?;
    ost.set_parameters(&encoder);
    ost.set_time_base(time_base);
    ost.set_avg_frame_rate(Rational::new(fps, 1));
    octx.write_header().map_err(err)?;
    let stream_tb = octx.stream(0).ok_or("no output stream")?.time_base();
    let drain = |encoder: &mut ffmpeg::encoder::Video,
                 octx: &mut ffmpeg::format::context::Output|
     -> Result<(), String> {
        let mut packet = ffmpeg::Packet::empty();
        while encoder.receive_packet(&mut packet).is_ok() {
            packet.set_stream(0);
            packet.rescale_ts(time_base, stream_tb);
            packet.write_interleaved(octx).map_err(err)?;
        }
        Ok(())
    };
    for i in 0..frames {
        let mut frame = frame::Video::new(Pixel::YUV420P, width, height);
        for plane in 0..3 {
            let fill = (i as u8).wrapping_mul(8).wrapping_add(plane as u8 * 60);
            frame.data_mut(plane).fill(fill);
        }
        frame.set_pts(Some(i));
        encoder.send_frame(&frame).map_err(err)?;
        drain(&mut encoder, &mut octx)?;
    }
    encoder.send_eof().map_err(err)?;
    drain(&mut encoder, &mut octx)?;
    octx.write_trailer().map_err(err)
}
