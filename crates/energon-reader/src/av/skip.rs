//! Reaching a clip's first frame without decoding the frames before it that no other frame
//! refers to (H.264 non-reference pictures), for the frame-number reader.
//!
//! The reference decodes and counts every frame from the keyframe it seeks to up to the clip's
//! start. The frames it counts are the first `n` frames in presentation order after the
//! keyframe, so the clip starts at the frame with the `n`-th smallest PTS (from 0) among the
//! packets from the keyframe on. Packets are demuxed ahead until that PTS is certain (a packet's
//! PTS is never below its DTS, and DTS rises, so once the last DTS reaches the candidate no
//! later packet can come before it); packets of non-reference pictures before it are not
//! decoded (no other picture predicts from them, so every decoded picture is the same); the
//! rest are decoded and their frames before the start are dropped. The count is then checked:
//! the decoder must have given exactly the frames the reference would have counted, minus the
//! dropped ones, followed by the start frame. Anything unexpected (not H.264 in length-prefixed
//! form, a keyframe that is not an IDR picture, packets without timestamps, a count that does
//! not match, the end of the stream) makes the reader seek again and decode every frame as the
//! reference does.

use std::collections::VecDeque;

use ffmpeg::{Packet, codec::Id, frame};
use ffmpeg_next as ffmpeg;

use super::container::{Container, FrameIter, Msg, Timed};

/// How many packets past the start a read-ahead may take before giving up.
const MAX_LOOKAHEAD: usize = 64;

#[cfg(test)]
thread_local! {
    /// Tests: whether the skip-ahead is on, and how many skips it made.
    pub(crate) static TEST_STATE: std::cell::Cell<(bool, usize)> =
        const { std::cell::Cell::new((true, 0)) };
}

/// Whether the reader tries the skip-ahead (always, except in tests that turn it off).
pub(crate) fn enabled() -> bool {
    #[cfg(test)]
    return TEST_STATE.get().0;
    #[cfg(not(test))]
    true
}

/// An H.264 stream in MP4 form (`avcC`): NAL units prefixed by their length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct H264 {
    /// Bytes of each NAL unit's length prefix (1, 2 or 4).
    length_size: usize,
}

impl H264 {
    /// The stream's layout when it is H.264 with `avcC` extradata.
    pub(crate) fn of(c: &Container, stream: usize) -> Option<H264> {
        let st = c.input.stream(stream)?;
        let params = st.parameters();
        if params.id() != Id::H264 {
            return None;
        }
        // SAFETY: valid codec parameters of an open stream; extradata is `extradata_size` bytes.
        let extradata = unsafe {
            let p = params.as_ptr();
            let size = usize::try_from((*p).extradata_size).ok()?;
            if (*p).extradata.is_null() || size < 7 {
                return None;
            }
            std::slice::from_raw_parts((*p).extradata, size)
        };
        // avcC starts with configurationVersion 1; Annex B extradata starts with a start code.
        if extradata[0] != 1 {
            return None;
        }
        let length_size = usize::from(extradata[4] & 3) + 1;
        (length_size != 3).then_some(H264 { length_size })
    }

    /// The header bytes of the packet's NAL units; `None` when the packet does not parse.
    fn nal_headers(self, data: &[u8]) -> Option<Vec<u8>> {
        let mut headers = Vec::new();
        let mut rest = data;
        while !rest.is_empty() {
            let (len, tail) = rest.split_at_checked(self.length_size)?;
            let len = len.iter().fold(0usize, |a, &b| (a << 8) | usize::from(b));
            if len == 0 || len > tail.len() {
                return None;
            }
            headers.push(tail[0]);
            rest = &tail[len..];
        }
        Some(headers)
    }

    /// Whether the packet holds an IDR picture.
    fn is_idr(self, packet: &Packet) -> bool {
        let headers = packet.data().and_then(|d| self.nal_headers(d));
        headers.is_some_and(|h| h.iter().any(|b| b & 0x1f == 5))
    }

    /// Whether the packet is a non-reference picture and nothing else: slices with
    /// `nal_ref_idc` 0, access unit delimiters and filler only.
    fn is_disposable(self, packet: &Packet) -> bool {
        let Some(headers) = packet.data().and_then(|d| self.nal_headers(d)) else {
            return false;
        };
        let slice = |b: u8| b & 0x1f == 1 && b & 0x60 == 0;
        headers.iter().any(|&b| slice(b))
            && headers.iter().all(|&b| slice(b) || matches!(b & 0x1f, 9 | 12))
    }
}

/// Packets read ahead from the keyframe, and the PTS of the clip's first frame.
struct Lookahead {
    packets: Vec<Packet>,
    start_pts: i64,
}

/// Reads packets of `stream` from the keyframe on until the PTS of the frame `n` places after
/// it (in presentation order) is certain; `None` where the assumptions do not hold.
fn read_ahead(
    c: &mut Container,
    stream: usize,
    h264: H264,
    n: usize,
) -> Result<Option<Lookahead>, Msg> {
    let mut packets: Vec<Packet> = Vec::new();
    let mut pts: Vec<i64> = Vec::new();
    let mut last_dts = None;
    while packets.len() <= n + MAX_LOOKAHEAD {
        let Some(p) = c.next_packet(stream)? else { return Ok(None) };
        let (Some(t), Some(d)) = (p.pts(), p.dts()) else { return Ok(None) };
        if t < d || last_dts.is_some_and(|l| d <= l) || (packets.is_empty() && !h264.is_idr(&p)) {
            return Ok(None);
        }
        last_dts = Some(d);
        packets.push(p);
        pts.push(t);
        if pts.len() > n {
            let mut sorted = pts.clone();
            sorted.sort_unstable();
            if sorted.windows(2).any(|w| w[0] == w[1]) {
                return Ok(None);
            }
            if sorted[n] <= d {
                return Ok(Some(Lookahead { packets, start_pts: sorted[n] }));
            }
        }
    }
    Ok(None)
}

/// Consumes the `n` frames after the keyframe the reader has just sought to (its frame
/// iterator flushed and idle), as the reference's counting loop does, without decoding the
/// disposable ones. `Ok(true)`: the next frame the iterator gives is the clip's first;
/// `Ok(false)`: nothing was consumed, the caller seeks to `keyframe_ts` again and counts.
pub(crate) fn skip_frames(
    c: &mut Container,
    frames: &mut FrameIter<frame::Video>,
    h264: H264,
    n: usize,
) -> Result<bool, Msg> {
    let Some(ahead) = read_ahead(c, frames.stream, h264, n)? else { return Ok(false) };
    let start = ahead.start_pts;
    let mut dropped = 0usize;
    let mut kept = VecDeque::with_capacity(ahead.packets.len());
    for p in ahead.packets {
        if p.pts().is_some_and(|t| t < start) && h264.is_disposable(&p) {
            dropped += 1;
        } else {
            kept.push_back(p);
        }
    }
    frames.queue_packets(kept);
    let mut counted = dropped;
    while let Some(f) = frames.next(c)? {
        match f.ts() {
            Some(t) if t < start => counted += 1,
            Some(t) if t == start && counted == n => {
                frames.push_front(f);
                #[cfg(test)]
                TEST_STATE.set((true, TEST_STATE.get().1 + 1));
                return Ok(true);
            }
            _ => break,
        }
    }
    frames.reset();
    Ok(false)
}
