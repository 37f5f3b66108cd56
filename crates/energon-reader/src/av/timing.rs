//! Stream timing as the reference's FFmpeg (8.x, bundled with PyAV) reports it, whichever
//! FFmpeg is linked: older demuxers report other durations and start times for the same files,
//! and the reference's `get_audio_duration`, clip timestamps and clip lengths follow them.
//!
//! - MP3 with a Xing/Info frame count: the duration excludes the encoder delay and padding the
//!   LAME tag declares (FFmpeg 8 does; 5.1 counts every frame's samples).
//! - Matroska/WebM audio with a codec delay (`CodecDelay`: AAC priming, Opus pre-skip): the
//!   stream starts after the delay, the first block's delay is skipped when decoding (Opus
//!   decoders skip it themselves), and a block with discard padding at its end lasts only as
//!   long as the samples it keeps. FFmpeg 8's Matroska demuxer does this; 5.1's does not.

use ffmpeg::{
    Packet,
    codec::packet::{Mut, Ref},
    ffi,
};
use ffmpeg_next as ffmpeg;

/// The libavformat major version whose Matroska demuxer applies codec delay and discard padding
/// to timestamps itself (FFmpeg 8.0; checked against 5.1's, major 59).
const MATROSKA_TIMING_MAJOR: u32 = 62;

/// Fix-ups of one open container.
#[derive(Debug, Default)]
pub(crate) struct Timing {
    /// Per stream: the samples of codec delay to skip in the first packet read from it after
    /// opening, whatever its place (FFmpeg 8 skips them once per open container; streams of an
    /// older Matroska demuxer whose decoder does not skip them itself).
    skip_first: Vec<Option<i64>>,
    /// Whether packets with end discard padding get the duration of what they keep.
    trim_ends: bool,
}

fn rescale(value: i64, from: ffi::AVRational, to: ffi::AVRational) -> i64 {
    // SAFETY: pure arithmetic.
    unsafe { ffi::av_rescale_q(value, from, to) }
}

impl Timing {
    /// Adjusts the streams of a just opened container over `data`.
    pub(crate) fn apply(input: *mut ffi::AVFormatContext, data: &[u8]) -> Timing {
        // SAFETY: an open format context with `nb_streams` valid streams.
        unsafe {
            let name = std::ffi::CStr::from_ptr((*(*input).iformat).name).to_bytes();
            let streams = match (*input).streams {
                p if p.is_null() => &[][..],
                p => std::slice::from_raw_parts(p, (*input).nb_streams as usize),
            };
            let mut timing = Timing { skip_first: vec![None; streams.len()], trim_ends: false };
            if let (b"mp3", Some(&st), Some(samples)) = (name, streams.first(), mp3_samples(data))
                && (*(*st).codecpar).sample_rate > 0
            {
                let tb = ffi::AVRational { num: 1, den: (*(*st).codecpar).sample_rate };
                (*st).duration = rescale(samples, tb, (*st).time_base);
            }
            let old = ffi::avformat_version() >> 16 < MATROSKA_TIMING_MAJOR;
            if old && name.starts_with(b"matroska") {
                timing.trim_ends = true;
                for (i, &st) in streams.iter().enumerate() {
                    let par = &*(*st).codecpar;
                    let start = (*st).start_time;
                    if par.codec_type != ffi::AVMediaType::AVMEDIA_TYPE_AUDIO
                        || par.initial_padding <= 0
                        || par.sample_rate <= 0
                        || start == ffi::AV_NOPTS_VALUE
                    {
                        continue;
                    }
                    let delay = i64::from(par.initial_padding);
                    let tb = ffi::AVRational { num: 1, den: par.sample_rate };
                    (*st).start_time = start + rescale(delay, tb, (*st).time_base);
                    if par.codec_id != ffi::AVCodecID::AV_CODEC_ID_OPUS {
                        timing.skip_first[i] = Some(delay);
                    }
                }
            }
            timing
        }
    }

    /// Adjusts a packet of stream `stream` as the newer demuxer gives it.
    pub(crate) fn packet(
        &mut self,
        packet: &mut Packet,
        stream: *const ffi::AVStream,
        index: usize,
    ) {
        if let Some(delay) = self.skip_first.get_mut(index).and_then(Option::take) {
            // SAFETY: a valid packet; the side data is written in full (10 bytes).
            unsafe {
                let kind = ffi::AVPacketSideDataType::AV_PKT_DATA_SKIP_SAMPLES;
                let p = ffi::av_packet_new_side_data(packet.as_mut_ptr(), kind, 10);
                if !p.is_null() {
                    let bytes = (delay as u32).to_le_bytes();
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, 4);
                    std::ptr::write_bytes(p.add(4), 0, 6);
                }
            }
        }
        if !self.trim_ends {
            return;
        }
        // SAFETY: a valid packet and its stream.
        unsafe {
            let mut size = 0;
            let kind = ffi::AVPacketSideDataType::AV_PKT_DATA_SKIP_SAMPLES;
            let p = ffi::av_packet_get_side_data(packet.as_ptr(), kind, &mut size);
            let rate = (*(*stream).codecpar).sample_rate;
            if p.is_null() || size < 8 || rate <= 0 || packet.duration() <= 0 {
                return;
            }
            let end = i64::from(u32::from_le_bytes(*(p.add(4) as *const [u8; 4])));
            if end > 0 {
                let (tb, sr) = ((*stream).time_base, ffi::AVRational { num: 1, den: rate });
                let samples = rescale(packet.duration(), tb, sr);
                packet.set_duration(rescale((samples - end).max(0), sr, tb));
            }
        }
    }
}

/// An MP3's sample count as its Xing/Info frame count and LAME tag give it: frames times samples
/// per frame, less the encoder delay and padding. `None` without a frame count.
pub(crate) fn mp3_samples(data: &[u8]) -> Option<i64> {
    let mut at = 0;
    if data.starts_with(b"ID3") && data.len() >= 10 {
        let size = data[6..10].iter().fold(0usize, |acc, &b| (acc << 7) | usize::from(b & 0x7f));
        at = 10 + size + if data[5] & 0x10 != 0 { 10 } else { 0 };
    }
    // The first frame header within 64 KiB of the tag.
    let end = data.len().min(at + 65536).saturating_sub(4);
    let start = (at..end).find(|&i| {
        let h = &data[i..i + 4];
        h[0] == 0xff
            && h[1] & 0xe0 == 0xe0
            && (h[1] >> 3) & 3 != 1
            && (h[1] >> 1) & 3 == 1
            && (h[2] >> 4) != 0xf
            && (h[2] >> 2) & 3 != 3
    })?;
    let h = &data[start..start + 4];
    let mpeg1 = (h[1] >> 3) & 3 == 3;
    let mono = (h[3] >> 6) & 3 == 3;
    let spf: i64 = if mpeg1 { 1152 } else { 576 };
    let side_info = match (mpeg1, mono) {
        (true, false) => 32,
        (true, true) | (false, false) => 17,
        (false, true) => 9,
    };
    let tag = start + 4 + side_info;
    let field = |at: usize, n: usize| data.get(at..at + n);
    if !matches!(field(tag, 4)?, b"Xing" | b"Info") {
        return None;
    }
    let be32 = |at: usize| field(at, 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let flags = be32(tag + 4)?;
    let mut pos = tag + 8;
    let frames = if flags & 1 != 0 {
        pos += 4;
        i64::from(be32(pos - 4)?)
    } else {
        return None;
    };
    for (bit, len) in [(2, 4), (4, 100), (8, 4)] {
        if flags & bit != 0 {
            pos += len;
        }
    }
    let mut pads = 0;
    if let Some(version) = field(pos, 9)
        && [b"LAME", b"Lavf", b"Lavc"].iter().any(|v| version.starts_with(*v))
        && let Some(b) = field(pos + 21, 3)
    {
        let v = (i64::from(b[0]) << 16) | (i64::from(b[1]) << 8) | i64::from(b[2]);
        pads = (v >> 12) + (v & 0xfff);
    }
    Some((frames * spf - pads).max(0))
}
