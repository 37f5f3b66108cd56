//! Audio/video metadata with FFmpeg (cargo feature `video`), computed step by step as the
//! reference's `AVDecoder.get_metadata(get_audio_num_samples=True)` computes it with PyAV.
//!
//! A tar member is opened through FFmpeg's `subfile` protocol (a byte range of the shard), so
//! FFmpeg reads and seeks in the shard itself and nothing is copied.

use std::sync::Once;

use ffmpeg::{
    Rational, codec::context::Context as CodecContext, ffi::AV_NOPTS_VALUE, format::context::Input,
    frame, media::Type,
};
use ffmpeg_next as ffmpeg;

use super::{AvMetadata, AvSource};

static INIT: Once = Once::new();

/// Initializes FFmpeg once and silences its own logging (libraries do not print).
fn init() {
    INIT.call_once(|| {
        if let Err(e) = ffmpeg::init() {
            tracing::warn!("cannot initialize FFmpeg: {e}");
        }
        ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Quiet);
    });
}

/// A stream value that FFmpeg marks as unknown (`AV_NOPTS_VALUE`) as `None`, as PyAV does.
fn known(value: i64) -> Option<i64> {
    (value != AV_NOPTS_VALUE).then_some(value)
}

/// PyAV's `float(Fraction)` of a rational; `None` when either part is 0.
fn rational(r: Rational) -> Option<f64> {
    (r.numerator() != 0 && r.denominator() != 0)
        .then(|| f64::from(r.numerator()) / f64::from(r.denominator()))
}

/// Duration in seconds of `ticks` of a stream: `(ticks - start_time) * float(time_base)`.
fn seconds(ticks: i64, start_time: i64, time_base: Rational) -> f64 {
    let ticks = match known(start_time) {
        Some(start) => ticks - start,
        None => ticks,
    };
    match rational(time_base) {
        Some(tb) => ticks as f64 * tb,
        None => ticks as f64,
    }
}

/// Reads the audio/video metadata of a file or a byte range of one.
pub(crate) fn probe_video(source: AvSource<'_>) -> Result<AvMetadata, String> {
    init();
    let Some((path, offset)) = source.file else {
        return Err("FFmpeg reads media from files only".to_owned());
    };
    if source.data.is_empty() {
        return Err("empty file".to_owned());
    }
    let path = std::path::absolute(path).map_err(|e| format!("cannot resolve the path: {e}"))?;
    let path = path.to_str().ok_or("the file path is not UTF-8")?;
    let end = offset + source.data.len() as u64;
    let url = format!("subfile,,start,{offset},end,{end},,:file:{path}");
    let mut input =
        ffmpeg::format::input(&url).map_err(|e| format!("FFmpeg cannot open it: {e}"))?;
    let mut meta = AvMetadata::default();
    let first = |input: &Input, kind: Type| {
        input.streams().find(|s| s.parameters().medium() == kind).map(|s| s.index())
    };
    if let Some(index) = first(&input, Type::Video) {
        video(&mut input, index, &mut meta)?;
    }
    if let Some(index) = first(&input, Type::Audio) {
        audio(&mut input, index, &mut meta)?;
    }
    Ok(meta)
}

fn video(input: &mut Input, index: usize, meta: &mut AvMetadata) -> Result<(), String> {
    let stream = input.stream(index).ok_or("video stream vanished")?;
    let (time_base, start_time) = (stream.time_base(), stream.start_time());
    let avg_rate = stream.avg_frame_rate();
    let parameters = stream.parameters();
    let mut duration = known(stream.duration());
    let mut num_frames = None;
    if duration.is_none() {
        // No duration in the header: count the packets and end at the last one.
        let (count, last) = demux_count(input, index);
        num_frames = Some(count);
        duration = last;
    }
    meta.video_duration = duration.map(|d| seconds(d, start_time, time_base));
    let num_frames = match num_frames {
        Some(n) => n,
        None => demux_count(input, index).0,
    };
    meta.video_num_frames = Some(num_frames);
    meta.video_fps = rational(avg_rate)
        .or_else(|| meta.video_duration.filter(|&d| d != 0.0).map(|d| num_frames as f64 / d));
    input.seek(0, ..).map_err(|e| format!("cannot seek to the start: {e}"))?;
    let context = CodecContext::from_parameters(parameters.clone())
        .map_err(|e| format!("unsupported video codec: {e}"))?;
    let (stream_width, stream_height) = {
        let d = context.decoder().video().map_err(|e| format!("unsupported video codec: {e}"))?;
        (d.width(), d.height())
    };
    let mut decoder = CodecContext::from_parameters(parameters)
        .and_then(|c| c.decoder().video())
        .map_err(|e| format!("unsupported video codec: {e}"))?;
    let mut frame = frame::Video::empty();
    let mut size = None;
    for (stream, packet) in input.packets() {
        if stream.index() != index {
            continue;
        }
        decoder.send_packet(&packet).map_err(|e| format!("cannot decode video: {e}"))?;
        if decoder.receive_frame(&mut frame).is_ok() {
            size = Some((frame.width(), frame.height()));
            break;
        }
    }
    if size.is_none() && decoder.send_eof().is_ok() && decoder.receive_frame(&mut frame).is_ok() {
        size = Some((frame.width(), frame.height()));
    }
    let (width, height) = size.unwrap_or((stream_width, stream_height));
    meta.video_width = Some(width);
    meta.video_height = Some(height);
    Ok(())
}

/// Counts the packets of stream `index` that have a timestamp, from the current position to the
/// end, and returns the end (`pts + duration`) of the last one.
fn demux_count(input: &mut Input, index: usize) -> (u64, Option<i64>) {
    let mut count = 0;
    let mut last = None;
    for (stream, packet) in input.packets() {
        if stream.index() != index {
            continue;
        }
        if let Some(pts) = packet.pts() {
            count += 1;
            last = Some(pts + packet.duration());
        }
    }
    (count, last)
}

fn audio(input: &mut Input, index: usize, meta: &mut AvMetadata) -> Result<(), String> {
    let stream = input.stream(index).ok_or("audio stream vanished")?;
    let (time_base, start_time) = (stream.time_base(), stream.start_time());
    let mut duration = known(stream.duration());
    let mut decoder = CodecContext::from_parameters(stream.parameters())
        .and_then(|c| c.decoder().audio())
        .map_err(|e| format!("unsupported audio codec: {e}"))?;
    meta.audio_sample_rate = Some(decoder.rate());
    let channels = u32::from(decoder.channels());
    input.seek(0, ..).map_err(|e| format!("cannot seek to the start: {e}"))?;
    let mut frame = frame::Audio::empty();
    let mut n_samples: u64 = 0;
    let mut last_end = None;
    let mut take = |decoder: &mut ffmpeg::decoder::Audio, frame: &mut frame::Audio| {
        while decoder.receive_frame(frame).is_ok() {
            if let Some(pts) = frame.pts() {
                last_end = Some(pts + frame.packet().duration);
            }
            n_samples += frame.samples() as u64;
        }
    };
    for (stream, packet) in input.packets() {
        if stream.index() != index {
            continue;
        }
        decoder.send_packet(&packet).map_err(|e| format!("cannot decode audio: {e}"))?;
        take(&mut decoder, &mut frame);
    }
    decoder.send_eof().map_err(|e| format!("cannot decode audio: {e}"))?;
    take(&mut decoder, &mut frame);
    meta.audio_num_samples = Some(n_samples);
    if let Some(end) = last_end {
        duration = Some(end);
    }
    meta.audio_duration = duration.map(|d| seconds(d, start_time, time_base));
    meta.audio_channels = Some(channels);
    Ok(())
}
