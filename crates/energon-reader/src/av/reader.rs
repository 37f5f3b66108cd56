//! The reference's video frame readers (`av_reader.py`): a seek index (the demuxer's own index
//! entries, or one built by demuxing the stream), and readers that seek by frame number or by
//! PTS and keep their position between clips, so that consecutive clips do not seek again.

use ffmpeg::{ffi, frame};
use ffmpeg_next as ffmpeg;

use super::{
    AvFault,
    container::{Container, FrameIter, Msg, Timed},
    skip::{self, H264},
};

/// Where seeks look up keyframes.
pub(crate) enum Index {
    /// The demuxer's index entries of the stream (`stream.index_entries`), read live: some
    /// demuxers add entries while they read.
    Stream(usize),
    /// Built by demuxing all packets of the stream (`AVProbeIndex`): `(pts, keyframe)` in
    /// demux order.
    Probe { entries: Vec<(i64, bool)>, keyframes: Vec<i64> },
}

impl Index {
    /// `AVProbeIndex(container, 0)`: demux every packet with a PTS, then seek to 0.
    pub(crate) fn probe(c: &mut Container, stream: usize) -> Result<Index, Msg> {
        let mut entries = Vec::new();
        let mut keyframes = Vec::new();
        while let Some(packet) = c.next_packet(stream)? {
            if let Some(pts) = packet.pts() {
                entries.push((pts, packet.is_key()));
                if packet.is_key() {
                    keyframes.push(pts);
                }
            }
        }
        c.seek(0, None, true)?;
        Ok(Index::Probe { entries, keyframes })
    }

    pub(crate) fn len(&self, c: &Container) -> i64 {
        match self {
            // SAFETY: a valid stream of an open container.
            Index::Stream(s) => {
                // SAFETY: a valid stream of an open container.
                i64::from(unsafe { ffi::avformat_index_get_entries_count(c.stream_ptr(*s)) })
            }
            Index::Probe { entries, .. } => entries.len() as i64,
        }
    }

    /// `index[i].timestamp`, with Python's negative indexing (`index[-1]` is the last entry).
    // COMPAT(energon 7.4.1): av_reader.py:AVReaderByPts.seek_read — a search that finds no
    // keyframe returns -1, and the reference then uses `index[-1]`, the last entry.
    pub(crate) fn timestamp(&self, c: &Container, i: i64) -> Result<i64, Msg> {
        let n = self.len(c);
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(AvFault::Request(format!("index entry {i} out of bounds for size {n}")));
        }
        match self {
            Index::Stream(s) => {
                // SAFETY: `j` is in bounds of the stream's index.
                let entry = unsafe { ffi::avformat_index_get_entry(c.stream_ptr(*s), j as i32) };
                if entry.is_null() {
                    return Err(AvFault::Request(format!("index entry {i} not found")));
                }
                // SAFETY: FFmpeg returned a valid entry.
                Ok(unsafe { (*entry).timestamp })
            }
            Index::Probe { entries, .. } => Ok(entries[j as usize].0),
        }
    }

    /// `index.search_timestamp(ts)` (backward, keyframes only): the entry of the last keyframe
    /// at or before `ts`, `-1` if none (the probe index answers 0 instead).
    pub(crate) fn search(&self, c: &Container, ts: i64) -> i64 {
        match self {
            Index::Stream(s) => {
                let flags = ffi::AVSEEK_FLAG_BACKWARD;
                // SAFETY: a valid stream of an open container.
                i64::from(unsafe { ffi::av_index_search_timestamp(c.stream_ptr(*s), ts, flags) })
            }
            Index::Probe { entries, keyframes } => {
                if keyframes.is_empty() {
                    return -1;
                }
                let pos = keyframes.partition_point(|&k| k <= ts);
                // COMPAT(energon 7.4.1): av_reader.py:AVProbeIndex.search_timestamp — before the
                // first keyframe it answers entry 0, keyframe or not.
                if pos == 0 {
                    return 0;
                }
                let found = keyframes[pos - 1];
                entries.iter().position(|&(t, k)| k && t == found).map_or(-1, |p| p as i64)
            }
        }
    }
}

/// Which reader a clip request uses.
pub(crate) enum Reader {
    /// `AVReaderByFrames`: ranges are frame numbers (positions in the index).
    Frames { next_index: i64, previous: Option<frame::Video> },
    /// `AVReaderByPts`: ranges are PTS ticks of the stream.
    Pts { next_pts: i64, previous: Option<frame::Video> },
}

/// A reader with its container, stream, index and frame iterator.
pub(crate) struct VideoReader {
    pub(crate) c: Container,
    pub(crate) stream: usize,
    pub(crate) index: Index,
    pub(crate) frames: FrameIter<frame::Video>,
    pub(crate) reader: Reader,
    /// Set for H.264 streams in MP4 form: frames before a clip's start are skipped without
    /// decoding the disposable ones (see the `skip` module).
    pub(crate) h264: Option<H264>,
}

impl VideoReader {
    fn seek(&mut self, ts: i64, backward: bool) -> Result<(), Msg> {
        self.c.seek(ts, Some(self.stream), backward)?;
        self.frames.flush();
        Ok(())
    }

    fn next(&mut self) -> Result<Option<frame::Video>, Msg> {
        self.frames.next(&mut self.c)
    }

    /// `seek_read(start, end)`: calls `emit` with every frame of the range (`end` inclusive,
    /// `None` to the end of the video).
    pub(crate) fn seek_read(
        &mut self,
        start: i64,
        end: Option<i64>,
        emit: &mut dyn FnMut(&frame::Video) -> Result<(), Msg>,
    ) -> Result<(), Msg> {
        if end.is_some_and(|e| start > e) {
            return Err(AvFault::Request(format!(
                "range start {start} must be less or equal than range end {end:?}"
            )));
        }
        match self.reader {
            Reader::Frames { .. } => self.by_frames(start, end, emit),
            Reader::Pts { .. } => self.by_pts(start, end, emit),
        }
    }

    fn by_frames(
        &mut self,
        start: i64,
        mut end: Option<i64>,
        emit: &mut dyn FnMut(&frame::Video) -> Result<(), Msg>,
    ) -> Result<(), Msg> {
        let len = self.index.len(&self.c);
        // Requests past the end of the index give no frames.
        if start >= len {
            return Ok(());
        }
        if end.is_some_and(|e| e >= len) {
            end = Some(len - 1);
        }
        let target = self.index.timestamp(&self.c, start)?;
        let keyframe = self.index.search(&self.c, target);
        let keyframe_ts = self.index.timestamp(&self.c, keyframe)?;
        let Reader::Frames { next_index, previous } = &mut self.reader else { unreachable!() };
        let (mut next, previous_frame) = (*next_index, previous.take());
        let mut frame = None;
        if next < keyframe || start < next {
            // Forward seek: the timestamp comes from the index, so it lands on the keyframe.
            next = keyframe;
            let idle = self.frames.is_idle() && skip::enabled();
            self.seek(keyframe_ts, false)?;
            if let (Some(h264), true, Ok(n @ 1..)) =
                (self.h264, idle, usize::try_from(start - next))
            {
                if skip::skip_frames(&mut self.c, &mut self.frames, h264, n)? {
                    next = start;
                } else {
                    self.seek(keyframe_ts, false)?;
                }
            }
        } else {
            frame = previous_frame.as_ref().map(|f| (*f).clone());
        }
        let mut last = previous_frame;
        // Skip the frames between the keyframe (or the previous clip) and `start`.
        let mut next_idx = next;
        for k in (next + 1)..=start {
            match self.next()? {
                Some(f) => {
                    next_idx = k;
                    frame = Some(f);
                }
                None => break,
            }
        }
        next = next_idx;
        let mut done = false;
        if let (Some(f), true) = (&frame, next - 1 == start) {
            // The previous clip ended on this frame: hand it out again.
            emit(f)?;
            done = end == Some(start);
        }
        while !done {
            let Some(f) = self.next()? else { break };
            next += 1;
            emit(&f)?;
            last = Some(f);
            done = end.is_some_and(|e| next > e);
        }
        self.reader = Reader::Frames { next_index: next, previous: last };
        Ok(())
    }

    fn by_pts(
        &mut self,
        start: i64,
        end: Option<i64>,
        emit: &mut dyn FnMut(&frame::Video) -> Result<(), Msg>,
    ) -> Result<(), Msg> {
        let keyframe = self.index.search(&self.c, start);
        let keyframe_ts = self.index.timestamp(&self.c, keyframe)?;
        let Reader::Pts { next_pts, previous } = &mut self.reader else { unreachable!() };
        let (mut next, mut previous) = (*next_pts, previous.take());
        let mut frame = None;
        if next < keyframe_ts || start < next {
            next = keyframe_ts;
            previous = None;
            self.seek(keyframe_ts, true)?;
        } else {
            frame = previous.take();
        }
        let ends_before = |f: &frame::Video| start >= f.pts().unwrap_or(0) + Timed::duration(f);
        if frame.as_ref().is_none_or(ends_before) {
            // Keep the previous frame for the case that nothing follows.
            if previous.is_none() {
                previous = frame.take();
            }
            frame = None;
            while let Some(f) = self.next()? {
                if !ends_before(&f) {
                    frame = Some(f);
                    break;
                }
            }
            if let Some(f) = &frame {
                next = pts_of(f)?;
                previous = None;
            }
        }
        let Some(mut current) = frame else {
            // At the end of the video; the position stays as it was.
            self.reader = Reader::Pts { next_pts: next, previous };
            return Ok(());
        };
        emit(&current)?;
        let mut exhausted = false;
        while end.is_none_or(|e| current.pts().unwrap_or(0) + Timed::duration(&current) <= e) {
            let Some(f) = self.next()? else {
                exhausted = true;
                break;
            };
            current = f;
            next = pts_of(&current)?;
            emit(&current)?;
        }
        let previous = (!exhausted).then_some(current);
        self.reader = Reader::Pts { next_pts: next, previous };
        Ok(())
    }
}

/// A frame's PTS; the reference cannot time a frame without one.
pub(crate) fn pts_of<F: Timed>(f: &F) -> Result<i64, Msg> {
    f.ts().ok_or(AvFault::Missing("decoded frame has no timestamp"))
}
