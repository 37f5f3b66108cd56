//! Audio clips as the reference's `AVDecoder.get_audio_clips` cuts them: seek near the start,
//! decode, crop the frame before the start and the frame at the end, with its rounding rules.

use ffmpeg::{format::Sample, frame};

use crate::decode::TensorData;
use ffmpeg_next as ffmpeg;

use super::{
    AudioClip, AvFault,
    container::{Container, FrameIter, Msg, Timed, fraction, known, ticks_to_seconds},
};

/// A sample type FFmpeg stores in native byte order.
trait Native: Copy {
    const WIDTH: usize;
    fn read(b: &[u8]) -> Self;
}

macro_rules! native {
    ($($t:ty),*) => {$(
        impl Native for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().unwrap_or_default())
            }
        }
    )*};
}
native!(u8, i16, i32, i64, f32, f64);

/// A frame's samples as `(channels, samples)`, channel-major.
fn channel_major<T: Native>(f: &frame::Audio, channels: usize, planar: bool) -> Vec<T> {
    let n = f.samples();
    let mut out = Vec::with_capacity(channels * n);
    // SAFETY: FFmpeg's extended_data holds one plane per channel (planar) or one interleaved
    // plane, each of at least `samples * width` (times channels) bytes.
    let plane = |p: usize, len: usize| unsafe {
        std::slice::from_raw_parts(*(*f.as_ptr()).extended_data.add(p), len)
    };
    if planar {
        for c in 0..channels {
            out.extend(plane(c, n * T::WIDTH).chunks_exact(T::WIDTH).map(T::read));
        }
    } else {
        let data = plane(0, n * T::WIDTH * channels);
        for c in 0..channels {
            out.extend(data.chunks_exact(T::WIDTH).skip(c).step_by(channels).map(T::read));
        }
    }
    out
}

/// One decoded audio frame as `(channels, samples)` in its own sample type, channel-major.
pub(crate) fn frame_samples(f: &frame::Audio) -> Result<(usize, TensorData), Msg> {
    let channels = usize::from(f.channels()).max(1);
    let planar = |t| t == ffmpeg::format::sample::Type::Planar;
    Ok((
        channels,
        match f.format() {
            Sample::None => return Err(AvFault::Missing("audio frame without sample format")),
            Sample::U8(t) => TensorData::U8(channel_major(f, channels, planar(t))),
            Sample::I16(t) => TensorData::I16(channel_major(f, channels, planar(t))),
            Sample::I32(t) => TensorData::I32(channel_major(f, channels, planar(t))),
            Sample::I64(t) => TensorData::I64(channel_major(f, channels, planar(t))),
            Sample::F32(t) => TensorData::F32(channel_major(f, channels, planar(t))),
            Sample::F64(t) => TensorData::F64(channel_major(f, channels, planar(t))),
        },
    ))
}

/// Samples `[from, to)` of a `(channels, n)` buffer, appended per channel.
struct Parts {
    channels: usize,
    chunks: Vec<(TensorData, usize, usize, usize)>,
    count: usize,
}

/// Channel `c`'s samples `[from, to)` of every chunk, channel after channel.
fn gather<T: Copy>(
    channels: usize,
    count: usize,
    chunks: &[(&[T], usize, usize, usize)],
) -> Vec<T> {
    let mut data = Vec::with_capacity(channels * count);
    for c in 0..channels {
        for (chunk, n, from, to) in chunks {
            data.extend_from_slice(&chunk[c * n + from..c * n + to]);
        }
    }
    data
}

impl Parts {
    fn push(&mut self, (channels, data): (usize, TensorData), from: usize, to: Option<usize>) {
        self.channels = channels;
        let n = data.len() / channels.max(1);
        let from = from.min(n);
        let to = to.map_or(n, |t| t.min(n)).max(from);
        self.count += to - from;
        self.chunks.push((data, n, from, to));
    }

    fn into_clip(self, start: f64, end: f64) -> Result<AudioClip, Msg> {
        macro_rules! typed {
            ($variant:ident) => {{
                let mut chunks = Vec::with_capacity(self.chunks.len());
                for (data, n, from, to) in &self.chunks {
                    let TensorData::$variant(v) = data else {
                        return Err(AvFault::SampleTypeChanged {
                            before: self.chunks[0].0.dtype(),
                            now: data.dtype(),
                        });
                    };
                    chunks.push((v.as_slice(), *n, *from, *to));
                }
                TensorData::$variant(gather(self.channels, self.count, &chunks))
            }};
        }
        let data = match self.chunks.first().map(|c| &c.0) {
            None | Some(TensorData::F32(_)) => typed!(F32),
            Some(TensorData::U8(_)) => typed!(U8),
            Some(TensorData::I16(_)) => typed!(I16),
            Some(TensorData::I32(_)) => typed!(I32),
            Some(TensorData::I64(_)) => typed!(I64),
            Some(TensorData::F64(_)) => typed!(F64),
            // `frame_samples` makes none of the other types.
            Some(other) => {
                return Err(AvFault::SampleTypeChanged { before: "PCM", now: other.dtype() });
            }
        };
        Ok(AudioClip {
            channels: self.channels,
            samples: self.count,
            data,
            timestamps: (start, end),
        })
    }
}

/// Python's `int(x)` of a float, where the reference truncates.
fn int(x: f64) -> i64 {
    x.trunc() as i64
}

/// The reference's slice bound `[:k]` / `[k:]` of a length `n` axis for a Python int `k`.
fn py_bound(k: i64, n: usize) -> usize {
    if k < 0 { (n as i64 + k).max(0) as usize } else { (k as usize).min(n) }
}

/// The whole stream decoded to `decoded` samples per channel: as many as its header declares,
/// where the header states it (FLAC's STREAMINFO, WAV's data chunk: exactly; an MP3's Xing/Info
/// frame count: within two frames). Less is a cut or corrupt file, which FFmpeg decodes
/// without a word (the same rule as the Rust audio decoder's).
fn check_whole_length(c: &Container, stream: usize, rate: u32, decoded: u64) -> Result<(), Msg> {
    let st = c.input.stream(stream).ok_or(AvFault::Missing("audio stream"))?;
    let (Some(ticks), Some(tb)) = (known(st.duration()), fraction(st.time_base())) else {
        return Ok(());
    };
    let declared =
        (i128::from(ticks) * i128::from(tb.0) * i128::from(rate) / i128::from(tb.1)).max(0) as u64;
    // SAFETY: a valid, open format context.
    let method = unsafe { (*c.input.as_ptr()).duration_estimation_method };
    let from_stream = method == ffmpeg::ffi::AVDurationEstimationMethod::AVFMT_DURATION_FROM_STREAM;
    let tolerance = match c.input.format().name() {
        "flac" | "wav" => 0,
        "mp3" if from_stream => 2 * 1152,
        _ => return Ok(()),
    };
    if decoded + tolerance < declared {
        return Err(AvFault::ShortAudio { decoded, declared });
    }
    Ok(())
}

/// The first audio stream of `c` decoded whole, every frame (timestamped or not), with its
/// sample rate: the eager decoder's audio. Less than a FLAC, WAV or MP3 header declares is a cut
/// or corrupt file, as for a whole-stream clip.
pub(crate) fn decode_all(c: &mut Container) -> Result<(u32, AudioClip), Msg> {
    let stream = c.first(ffmpeg::media::Type::Audio).ok_or(AvFault::Missing("no audio stream"))?;
    let rate = super::meta::sample_rate(c, stream)? as u32;
    let mut iter = FrameIter::<frame::Audio>::new(c, stream)?;
    let mut parts = Parts { channels: 1, chunks: Vec::new(), count: 0 };
    while let Some(f) = iter.next(c)? {
        parts.push(frame_samples(&f)?, 0, None);
    }
    check_whole_length(c, stream, rate, parts.count as u64)?;
    if parts.count == 0 {
        return Err(AvFault::NoSamples);
    }
    let seconds = parts.count as f64 / f64::from(rate);
    Ok((rate, parts.into_clip(0.0, seconds)?))
}

pub(crate) fn audio_clips(
    c: &mut Container,
    stream: usize,
    ranges: &[(f64, f64)],
) -> Result<Vec<AudioClip>, Msg> {
    let (rate, time_base) = {
        let st = c.input.stream(stream).ok_or(AvFault::Missing("audio stream"))?;
        let rate = ffmpeg::codec::context::Context::from_parameters(st.parameters())
            .and_then(|ctx| ctx.decoder().audio())
            .map(|d| d.rate())
            .map_err(|e| AvFault::Unsupported(format!("audio: {e}")))?;
        (rate, fraction(st.time_base()).ok_or(AvFault::Missing("audio stream without time base"))?)
    };
    if rate == 0 {
        return Err(AvFault::Missing("audio streams without sample rate are not supported"));
    }
    let sr = f64::from(rate);
    let mut out = Vec::new();
    let mut iter = FrameIter::<frame::Audio>::new(c, stream)?;
    for &(start_time, end_time) in ranges {
        // Seek near the start (the container's default stream decides where it lands).
        c.seek(int(start_time * 1_000_000.0), None, true)?;
        // A fresh `decode(audio=0)` generator per clip, on a flushed decoder.
        iter.flush();
        iter.restart();
        let desired = end_time.is_finite().then(|| int((end_time - start_time) * sr + 0.5));
        let mut parts = Parts { channels: 1, chunks: Vec::new(), count: 0 };
        let (mut clip_start, mut clip_end): (Option<f64>, Option<f64>) = (None, None);
        let mut previous: Option<frame::Audio> = None;
        while let Some(f) = iter.next(c)? {
            let pts = f.pts().ok_or(AvFault::Missing("audio frame has no timestamp"))?;
            let t = ticks_to_seconds(pts, time_base);
            let d = ticks_to_seconds(Timed::duration(&f), time_base);
            if t < start_time {
                previous = Some(f);
                continue;
            }
            if clip_start.is_none() {
                if let Some(p) = previous.take() {
                    // Crop the frame before the start to the start.
                    let p_start = ticks_to_seconds(p.pts().unwrap_or(0), time_base);
                    let samples = frame_samples(&p)?;
                    let n = samples.1.len() / samples.0.max(1);
                    let from = py_bound(int((start_time - p_start) * sr + 0.5), n);
                    parts.push(samples, from, None);
                    clip_start = Some(start_time);
                } else {
                    clip_start = Some(t);
                }
            }
            if t + d >= end_time {
                // Crop the last frame to the end time.
                let samples = frame_samples(&f)?;
                let mut take = int((end_time - t) * sr + 0.5);
                let projected = parts.count as i64 + take;
                if let Some(want) = desired {
                    // COMPAT(energon 7.4.1): av_decoder.py:AVDecoder.get_audio_clips — within
                    // one sample of the desired length, the last frame is cut to give it.
                    if (projected - want).abs() > 0 && (projected - want).abs() < 2 {
                        take = want - parts.count as i64;
                    }
                }
                let n = samples.1.len() / samples.0.max(1);
                parts.push(samples, 0, Some(py_bound(take, n)));
                clip_end = Some(end_time);
                break;
            }
            parts.push(frame_samples(&f)?, 0, None);
            clip_end = Some(t + d);
        }
        if start_time <= 0.0 && !end_time.is_finite() {
            check_whole_length(c, stream, rate, parts.count as u64)?;
        }
        if let (false, Some(s), Some(e)) = (parts.chunks.is_empty(), clip_start, clip_end) {
            out.push(parts.into_clip(s, e)?);
        }
    }
    Ok(out)
}
