//! Stream metadata as the reference's `AVDecoder.get_metadata` computes it (header values
//! first, demuxing or decoding only for what the header lacks and the flags ask for).

use ffmpeg::{frame, media::Type};
use ffmpeg_next as ffmpeg;

use energon_index::media::AvMetadata;

use super::{
    AvFault,
    container::{Container, FrameIter, Msg, Timed, fraction, known},
};

/// What `get_metadata` computes; the defaults are the reference's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadataRequest {
    /// Video metadata at all.
    pub video: bool,
    /// Video duration by demuxing when the header has none.
    pub video_duration: bool,
    /// Frame count by demuxing when not known otherwise.
    pub video_frame_count: bool,
    /// Frame size from the first decoded frame.
    pub video_frame_size: bool,
    /// Audio metadata at all.
    pub audio: bool,
    /// Audio duration by demuxing when the header has none.
    pub audio_duration: bool,
    /// Audio sample count by decoding.
    pub audio_num_samples: bool,
}

impl Default for MetadataRequest {
    fn default() -> Self {
        MetadataRequest {
            video: true,
            video_duration: true,
            video_frame_count: true,
            video_frame_size: true,
            audio: true,
            audio_duration: true,
            audio_num_samples: false,
        }
    }
}

pub(crate) fn sample_rate(c: &Container, stream: usize) -> Result<f64, Msg> {
    let st = c.input.stream(stream).ok_or(AvFault::Missing("audio stream"))?;
    // SAFETY: valid codec parameters of an open stream.
    let rate = unsafe { (*st.parameters().as_ptr()).sample_rate };
    if rate <= 0 {
        return Err(AvFault::Missing("audio streams without sample rate are not supported"));
    }
    Ok(f64::from(rate))
}

/// `(ticks - start_time) * float(time_base)`.
fn seconds(ticks: i64, start_time: i64, time_base: ffmpeg::Rational) -> f64 {
    let ticks = known(start_time).map_or(ticks, |s| ticks - s) as f64;
    match fraction(time_base) {
        Some((n, d)) => ticks * (n as f64 / d as f64),
        None => ticks,
    }
}

/// Demuxes stream `index` from the current position: packets with a PTS, and the end
/// (`pts + duration`) of the last one.
fn demux(c: &mut Container, index: usize) -> Result<(u64, Option<i64>), Msg> {
    let (mut count, mut last) = (0, None);
    while let Some(p) = c.next_packet(index)? {
        if let Some(pts) = p.pts() {
            count += 1;
            last = Some(pts + p.duration());
        }
    }
    Ok((count, last))
}

/// The metadata `prepare-media` stores for an audio or video file, as the reference's
/// `AVDecoder.get_metadata(get_audio_num_samples=True)` gives it; a file-backed source is read
/// in place (see `Container::open_subfile`).
pub(crate) fn probe(source: crate::media::AvSource<'_>) -> Result<AvMetadata, Msg> {
    let mut c = match source.file {
        Some((path, offset)) => Container::open_subfile(path, offset, source.data)?,
        None => Container::open(&bytes::Bytes::copy_from_slice(source.data))?,
    };
    metadata(&mut c, MetadataRequest { audio_num_samples: true, ..MetadataRequest::default() })
}

pub(crate) fn metadata(c: &mut Container, req: MetadataRequest) -> Result<AvMetadata, Msg> {
    let mut m = AvMetadata::default();
    if let (true, Some(v)) = (req.video, c.first(Type::Video)) {
        let st = c.input.stream(v).ok_or(AvFault::Missing("video stream"))?;
        let (tb, start, rate) = (st.time_base(), st.start_time(), st.avg_frame_rate());
        // SAFETY: valid codec parameters of an open stream.
        let (pw, ph) = unsafe {
            let p = st.parameters();
            ((*p.as_ptr()).width, (*p.as_ptr()).height)
        };
        let mut duration = known(st.duration());
        if req.video_duration && duration.is_none() {
            let (count, last) = demux(c, v)?;
            m.video_num_frames = Some(count);
            duration = last;
        }
        m.video_duration = duration.map(|d| seconds(d, start, tb));
        if req.video_frame_count && m.video_num_frames.is_none() {
            m.video_num_frames = Some(demux(c, v)?.0);
        }
        m.video_fps = match fraction(rate) {
            Some((n, d)) => Some(n as f64 / d as f64),
            None => match (m.video_num_frames, m.video_duration) {
                (Some(n), Some(d)) if d != 0.0 => Some(n as f64 / d),
                _ => None,
            },
        };
        if req.video_frame_size {
            c.seek(0, None, true)?;
            let mut frames = FrameIter::<frame::Video>::new(c, v)?;
            match frames.next(c)? {
                Some(f) => (m.video_width, m.video_height) = (Some(f.width()), Some(f.height())),
                None => (m.video_width, m.video_height) = (Some(pw as u32), Some(ph as u32)),
            }
        }
    }
    if let (true, Some(a)) = (req.audio, c.first(Type::Audio)) {
        let st = c.input.stream(a).ok_or(AvFault::Missing("audio stream"))?;
        let (tb, start) = (st.time_base(), st.start_time());
        // SAFETY: valid codec parameters of an open stream.
        let (rate, channels) = unsafe {
            let p = st.parameters().as_ptr();
            ((*p).sample_rate, (*p).ch_layout.nb_channels)
        };
        m.audio_sample_rate = (rate > 0).then_some(rate as u32);
        let mut duration = known(st.duration());
        if req.audio_num_samples {
            c.seek(0, None, true)?;
            let mut frames = FrameIter::<frame::Audio>::new(c, a)?;
            let (mut n, mut last) = (0u64, None);
            while let Some(f) = frames.next(c)? {
                if let Some(pts) = f.pts() {
                    last = Some(pts + Timed::duration(&f));
                }
                n += f.samples() as u64;
            }
            m.audio_num_samples = Some(n);
            if last.is_some() {
                duration = last;
            }
        }
        if req.audio_duration && duration.is_none() {
            c.seek(0, None, true)?;
            if let (_, Some(last)) = demux(c, a)? {
                duration = Some(last);
            }
        }
        m.audio_duration = duration.map(|d| seconds(d, start, tb));
        m.audio_channels = Some(channels.max(0) as u32);
    }
    Ok(m)
}
