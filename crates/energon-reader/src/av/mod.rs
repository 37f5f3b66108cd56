//! Video and audio decoding of a part's bytes with FFmpeg (cargo feature `video`), with the
//! operations and results of the reference's `AVDecoder` (`megatron.energon.av`): whole
//! streams, video clips by frame number or seconds, audio clips by sample or seconds, and the
//! stream metadata.
//!
//! Seeking follows the reference's index modes: MP4/MOV/M4V seek by frame number in the
//! demuxer's index, Matroska/WebM by PTS, anything else through an index built by demuxing.
//! Video frames come out as RGB24, logically `(frames, 3, height, width)` `u8` stored frame by
//! frame as `(height, width, 3)` (the reference's permuted view); audio as `(channels,
//! samples)` in the decoder's own sample type, as PyAV hands it out.

mod audio;
mod container;
mod error;
mod meta;
mod reader;
mod scale;
mod skip;
mod timing;

use bytes::Bytes;
use ffmpeg::{frame, media::Type};
use ffmpeg_next as ffmpeg;

use crate::decode::TensorData;

#[cfg(any(test, feature = "synth"))]
pub(crate) use self::container::init;
pub(crate) use self::meta::probe;
use self::{
    container::{Container, FrameIter, Msg, fraction, ticks_to_seconds},
    reader::{Index, Reader, VideoReader},
};
pub use self::{
    error::{AvError, AvFault},
    meta::MetadataRequest,
};

/// How video positions are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoUnit {
    /// Frame numbers.
    Frames,
    /// Seconds.
    Seconds,
}

/// How audio positions are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioUnit {
    /// Sample numbers.
    Samples,
    /// Seconds.
    Seconds,
}

/// How the reference seeks in a container, chosen from the content's file type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMode {
    /// By frame number in the demuxer's index (MP4, MOV, M4V).
    Frames,
    /// By PTS in the demuxer's index (Matroska, WebM).
    Pts,
    /// By an index built by demuxing the video stream (everything else).
    Probe,
}

/// A video clip: `frames` RGB24 frames of `height` x `width`, stored `(frames, height, width,
/// 3)`; the reference's tensor is the `(frames, 3, height, width)` view of it.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoClip {
    /// Number of frames.
    pub frames: usize,
    /// Frame height.
    pub height: usize,
    /// Frame width.
    pub width: usize,
    /// The pixels, frame by frame, row by row, `R G B`.
    pub data: Vec<u8>,
    /// Start (first frame's PTS) and end (last frame's PTS plus its duration) in seconds.
    pub timestamps: (f64, f64),
}

impl VideoClip {
    /// The reference's shape, `(frames, channels, height, width)`.
    pub fn shape(&self) -> [usize; 4] {
        [self.frames, 3, self.height, self.width]
    }

    /// Element strides of [`Self::shape`] into [`Self::data`].
    pub fn strides(&self) -> [usize; 4] {
        [self.height * self.width * 3, 1, self.width * 3, 3]
    }
}

/// An audio clip, `(channels, samples)`, channel by channel.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioClip {
    /// Number of channels.
    pub channels: usize,
    /// Samples per channel.
    pub samples: usize,
    /// The samples, channel-major, in the decoder's sample type as PyAV's
    /// `AudioFrame.to_ndarray` hands them out (`I16` for 16-bit PCM and FLAC, `I32` for 24- and
    /// 32-bit, left-aligned as FFmpeg decodes them, `U8` for 8-bit PCM, `F32` for MP3, AAC, Opus
    /// and Vorbis, `F64` for 64-bit float PCM): not scaled.
    pub data: TensorData,
    /// Start and end in seconds.
    pub timestamps: (f64, f64),
}

/// Decoded clips, the reference's `AVData`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AvData {
    /// Video clips.
    pub video_clips: Vec<VideoClip>,
    /// Audio clips.
    pub audio_clips: Vec<AudioClip>,
}

/// A decoder over one media part; every call opens the bytes afresh, as the reference does.
#[derive(Debug, Clone)]
pub struct AvDecoder {
    data: Bytes,
    origin: String,
}

impl AvDecoder {
    /// A decoder over `data`; `origin` names it in errors (dataset, shard, key, part).
    pub fn new(data: Bytes, origin: impl Into<String>) -> Self {
        AvDecoder { data, origin: origin.into() }
    }

    /// The media bytes.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// What names the media in errors.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    fn err(&self, fault: AvFault) -> AvError {
        AvError { origin: self.origin.clone(), fault }
    }

    fn open(&self) -> Result<Container, AvError> {
        Container::open(&self.data).map_err(|e| self.err(e))
    }

    /// The file type the reference's content sniffing (`filetype.guess`) gives (`mp4`, `mkv`,
    /// `wav`, ...).
    pub fn extension(&self) -> Option<&'static str> {
        crate::filetype::guess(&self.data).map(|(ext, _)| ext)
    }

    /// How video seeks work for this container.
    pub fn index_mode(&self) -> IndexMode {
        match self.extension() {
            Some("mkv" | "webm") => IndexMode::Pts,
            Some("mp4" | "mov" | "m4v") => IndexMode::Frames,
            _ => IndexMode::Probe,
        }
    }

    /// Video clips for `ranges` (start and end, end inclusive, in `unit`), optionally scaled
    /// (bilinear) to `out_size` = `(width, height)`. Ranges that give no frame give no clip.
    pub fn video_clips(
        &self,
        ranges: &[(f64, f64)],
        unit: VideoUnit,
        out_size: Option<(usize, usize)>,
    ) -> Result<Vec<VideoClip>, AvError> {
        self.video_clips_inner(ranges, unit, out_size).map_err(|e| self.err(e))
    }

    fn video_clips_inner(
        &self,
        ranges: &[(f64, f64)],
        unit: VideoUnit,
        out_size: Option<(usize, usize)>,
    ) -> Result<Vec<VideoClip>, Msg> {
        let mode = self.index_mode();
        let mut c = Container::open(&self.data)?;
        let stream = c
            .first(Type::Video)
            .ok_or(AvFault::Missing("no video stream found, but video clips are requested"))?;
        let index = match mode {
            IndexMode::Probe => Index::probe(&mut c, stream)?,
            _ => Index::Stream(stream),
        };
        let (rate, time_base) = {
            let st = c.input.stream(stream).ok_or(AvFault::Missing("video stream"))?;
            let rate =
                fraction(st.avg_frame_rate()).ok_or(AvFault::Missing("video stream has no FPS"))?;
            (
                rate,
                fraction(st.time_base())
                    .ok_or(AvFault::Missing("video stream has no time base"))?,
            )
        };
        let rate_f = rate.0 as f64 / rate.1 as f64;
        let tb_f = time_base.0 as f64 / time_base.1 as f64;
        // Ranges in the reader's native unit (float arithmetic, as the reference's float
        // ranges against its Fractions).
        let (by_frames, conv): (bool, Box<dyn Fn(f64) -> f64>) = match (unit, mode) {
            (VideoUnit::Frames, IndexMode::Frames | IndexMode::Probe) => (true, Box::new(|x| x)),
            (VideoUnit::Seconds, IndexMode::Pts | IndexMode::Probe) => {
                (false, Box::new(move |x| x / tb_f))
            }
            (VideoUnit::Frames, IndexMode::Pts) => (false, Box::new(move |x| x / rate_f / tb_f)),
            (VideoUnit::Seconds, IndexMode::Frames) => (true, Box::new(move |x| x * rate_f)),
        };
        let frames = FrameIter::new(&c, stream)?;
        let reader = if by_frames {
            Reader::Frames { next_index: 0, previous: None }
        } else {
            Reader::Pts { next_pts: 0, previous: None }
        };
        let h264 = (mode == IndexMode::Frames).then(|| skip::H264::of(&c, stream)).flatten();
        let mut r = VideoReader { c, stream, index, frames, reader, h264 };
        let mut out = Vec::new();
        for &(s, e) in ranges {
            let (s, e) = (conv(s), conv(e));
            if !s.is_finite() {
                return Err(AvFault::Request(format!("cannot start a clip at {s}")));
            }
            let start = s.trunc() as i64;
            let end = (e != f64::INFINITY).then(|| e.trunc() as i64);
            let mut data = Vec::new();
            let (mut first, mut last, mut count, mut size) = (None, None, 0usize, (0, 0));
            r.seek_read(start, end, &mut |f: &frame::Video| {
                let (w, h) =
                    out_size.map_or((f.width(), f.height()), |(w, h)| (w as u32, h as u32));
                size = (w as usize, h as usize);
                scale::rgb(f, w, h, &mut data)?;
                let pts = reader::pts_of(f)?;
                first.get_or_insert(ticks_to_seconds(pts, time_base));
                last = Some(ticks_to_seconds(pts + container::Timed::duration(f), time_base));
                count += 1;
                Ok(())
            })?;
            if let (Some(a), Some(b)) = (first, last) {
                out.push(VideoClip {
                    frames: count,
                    width: size.0,
                    height: size.1,
                    data,
                    timestamps: (a, b),
                });
            }
        }
        Ok(out)
    }

    /// Audio clips for `ranges` (start and end in `unit`).
    pub fn audio_clips(
        &self,
        ranges: &[(f64, f64)],
        unit: AudioUnit,
    ) -> Result<Vec<AudioClip>, AvError> {
        let mut c = self.open()?;
        let stream = c.first(Type::Audio).ok_or_else(|| {
            self.err(AvFault::Missing("no audio stream found, but audio clips are requested"))
        })?;
        let ranges: Vec<(f64, f64)> = match unit {
            AudioUnit::Seconds => ranges.to_vec(),
            AudioUnit::Samples => {
                let rate = meta::sample_rate(&c, stream).map_err(|e| self.err(e))?;
                ranges.iter().map(|&(s, e)| (s / rate, e / rate)).collect()
            }
        };
        audio::audio_clips(&mut c, stream, &ranges).map_err(|e| self.err(e))
    }

    /// Video and audio clips (`get_clips`); `None` ranges give no clips of that kind.
    pub fn clips(
        &self,
        video: Option<(&[(f64, f64)], VideoUnit)>,
        audio: Option<(&[(f64, f64)], AudioUnit)>,
        out_size: Option<(usize, usize)>,
    ) -> Result<AvData, AvError> {
        let video_clips = match video {
            Some((r, u)) => self.video_clips(r, u, out_size)?,
            None => Vec::new(),
        };
        let audio_clips = match audio {
            Some((r, u)) => self.audio_clips(r, u)?,
            None => Vec::new(),
        };
        Ok(AvData { video_clips, audio_clips })
    }

    /// The whole video (`get_video`).
    pub fn video(&self) -> Result<AvData, AvError> {
        self.clips(Some((&[(0.0, f64::INFINITY)], VideoUnit::Seconds)), None, None)
    }

    /// The whole audio (`get_audio`).
    pub fn audio(&self) -> Result<AvData, AvError> {
        self.clips(None, Some((&[(0.0, f64::INFINITY)], AudioUnit::Seconds)), None)
    }

    /// The whole video and audio (`get_video_with_audio`).
    pub fn video_with_audio(&self) -> Result<AvData, AvError> {
        let all: &[(f64, f64)] = &[(0.0, f64::INFINITY)];
        self.clips(Some((all, VideoUnit::Seconds)), Some((all, AudioUnit::Seconds)), None)
    }

    /// Everything by file type (`get_frames`): video files give their video (and audio with
    /// `with_audio`), audio files their audio, other types `None`.
    pub fn frames(&self, with_audio: bool) -> Result<Option<AvData>, AvError> {
        match self.extension() {
            Some("mov" | "mp4" | "webm" | "mkv" | "avi" | "m4v") if with_audio => {
                self.video_with_audio().map(Some)
            }
            Some("mov" | "mp4" | "webm" | "mkv" | "avi" | "m4v") => self.video().map(Some),
            Some("flac" | "mp3" | "wav") => self.audio().map(Some),
            _ => Ok(None),
        }
    }

    /// The first audio stream decoded whole (every frame, whether or not it has a timestamp),
    /// and its sample rate: what the eager decoder (`decode::Decoder`) makes of an audio part.
    pub fn decode_audio(&self) -> Result<(u32, AudioClip), AvError> {
        let mut c = self.open()?;
        audio::decode_all(&mut c).map_err(|e| self.err(e))
    }

    /// Whether the container has a video stream.
    pub fn has_video_stream(&self) -> Result<bool, AvError> {
        Ok(self.open()?.first(Type::Video).is_some())
    }

    /// Whether the container has an audio stream.
    pub fn has_audio_stream(&self) -> Result<bool, AvError> {
        Ok(self.open()?.first(Type::Audio).is_some())
    }

    /// The metadata the reference's `get_metadata` computes with these flags.
    pub fn metadata(
        &self,
        request: MetadataRequest,
    ) -> Result<energon_index::media::AvMetadata, AvError> {
        let mut c = self.open()?;
        meta::metadata(&mut c, request).map_err(|e| self.err(e))
    }

    /// Frames per second of the video stream.
    pub fn video_fps(&self) -> Result<f64, AvError> {
        let m = self.metadata(MetadataRequest {
            video: true,
            video_duration: false,
            video_frame_count: false,
            video_frame_size: false,
            audio: false,
            ..MetadataRequest::default()
        })?;
        m.video_fps.ok_or_else(|| self.err(AvFault::Missing("no video frame rate")))
    }

    /// Samples per second of the audio stream.
    pub fn audio_samples_per_second(&self) -> Result<u32, AvError> {
        let m = self.metadata(MetadataRequest {
            video: false,
            audio: true,
            audio_duration: false,
            ..MetadataRequest::default()
        })?;
        m.audio_sample_rate.ok_or_else(|| self.err(AvFault::Missing("no audio sample rate")))
    }

    /// Duration of the video stream in seconds, and its frame count when asked for.
    pub fn video_duration(&self, frame_count: bool) -> Result<(Option<f64>, Option<u64>), AvError> {
        let m = self.metadata(MetadataRequest {
            video: true,
            video_duration: true,
            video_frame_count: frame_count,
            video_frame_size: false,
            audio: false,
            audio_duration: false,
            ..MetadataRequest::default()
        })?;
        Ok((m.video_duration, m.video_num_frames))
    }

    /// Duration of the audio stream in seconds.
    pub fn audio_duration(&self) -> Result<Option<f64>, AvError> {
        let m = self.metadata(MetadataRequest {
            video: false,
            audio: true,
            audio_duration: true,
            ..MetadataRequest::default()
        })?;
        Ok(m.audio_duration)
    }
}

#[cfg(test)]
mod skip_tests;
#[cfg(test)]
mod tests;
