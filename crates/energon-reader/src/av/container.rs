//! An FFmpeg demuxer over a part's bytes (custom I/O on an in-memory cursor, no file), with
//! the operations of a PyAV container that the AV decoder uses: first video/audio stream,
//! `seek` (`av_seek_frame`, then decoder flush), and a frame iterator per stream that behaves
//! as PyAV's `container.decode(video=0)` generator, exhaustion included.

use std::{collections::VecDeque, io::Cursor};

use bytes::Bytes;
use ffmpeg::{
    Packet, Rational,
    codec::context::Context as CodecContext,
    ffi,
    format::{self, context::Input},
    frame,
    media::Type,
};
use ffmpeg_next as ffmpeg;

use super::{AvFault, timing::Timing};

/// What went wrong (the caller adds where the media lies).
pub(crate) type Msg = AvFault;

/// A stream value that FFmpeg marks as unknown (`AV_NOPTS_VALUE`) as `None`, as PyAV does.
pub(crate) fn known(value: i64) -> Option<i64> {
    (value != ffi::AV_NOPTS_VALUE).then_some(value)
}

/// PyAV's `Fraction` of a rational: `None` when either part is 0.
pub(crate) fn fraction(r: Rational) -> Option<(i64, i64)> {
    (r.numerator() != 0 && r.denominator() != 0)
        .then(|| (i64::from(r.numerator()), i64::from(r.denominator())))
}

/// `float(ticks * time_base)`: the exact product, rounded once.
pub(crate) fn ticks_to_seconds(ticks: i64, time_base: (i64, i64)) -> f64 {
    let num = i128::from(ticks) * i128::from(time_base.0);
    let den = i128::from(time_base.1);
    let g = gcd(num.unsigned_abs(), den.unsigned_abs()) as i128;
    let (num, den) = if g > 1 { (num / g, den / g) } else { (num, den) };
    num as f64 / den as f64
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// An open container over bytes.
pub(crate) struct Container {
    pub(crate) input: Input,
    /// Stream timing as the reference's FFmpeg reports it.
    timing: Timing,
}

/// Initializes FFmpeg once and silences its own logging (libraries do not print).
pub(crate) fn init() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        if let Err(e) = ffmpeg::init() {
            tracing::warn!("cannot initialize FFmpeg: {e}");
        }
        ffmpeg::util::log::set_level(ffmpeg::util::log::Level::Quiet);
    });
}

impl Container {
    /// Opens the bytes as a container (format probed from the content, as PyAV does for a file
    /// object).
    pub(crate) fn open(data: &Bytes) -> Result<Self, Msg> {
        init();
        if data.is_empty() {
            return Err(AvFault::Open("empty media part".to_owned()));
        }
        let io = format::context::StreamIo::from_read_seek(Cursor::new(data.clone()))
            .map_err(|e| AvFault::Open(format!("cannot set up reading: {e}")))?;
        let mut input =
            format::input_from_stream(io, None, None).map_err(|e| AvFault::Open(e.to_string()))?;
        // SAFETY: the context just opened.
        let timing = Timing::apply(unsafe { input.as_mut_ptr() }, data);
        Ok(Container { input, timing })
    }

    /// Opens bytes `data` that lie at `offset` of the file at `path` through FFmpeg's `subfile`
    /// protocol: FFmpeg reads and seeks in the file itself, nothing is copied.
    pub(crate) fn open_subfile(
        path: &std::path::Path,
        offset: u64,
        data: &[u8],
    ) -> Result<Self, Msg> {
        init();
        if data.is_empty() {
            return Err(AvFault::Open("empty media part".to_owned()));
        }
        let path = std::path::absolute(path)
            .map_err(|e| AvFault::Open(format!("cannot resolve the path: {e}")))?;
        let path = path.to_str().ok_or(AvFault::Missing("a UTF-8 file path"))?;
        let end = offset + data.len() as u64;
        let url = format!("subfile,,start,{offset},end,{end},,:file:{path}");
        let mut input = format::input(&url).map_err(|e| AvFault::Open(e.to_string()))?;
        // SAFETY: the context just opened.
        let timing = Timing::apply(unsafe { input.as_mut_ptr() }, data);
        Ok(Container { input, timing })
    }

    /// The index of the first stream of a kind (PyAV's `streams.video[0]`).
    pub(crate) fn first(&self, kind: Type) -> Option<usize> {
        self.input.streams().find(|s| s.parameters().medium() == kind).map(|s| s.index())
    }

    pub(crate) fn stream_ptr(&self, index: usize) -> *mut ffi::AVStream {
        // SAFETY: `index` comes from `first`, so it is below `nb_streams`.
        unsafe { *(*self.input.as_ptr()).streams.add(index) }
    }

    /// `container.seek(ts, backward=.., stream=..)`: `av_seek_frame` on the stream (or `-1`,
    /// with `ts` in `AV_TIME_BASE`). The caller flushes its decoders afterwards.
    pub(crate) fn seek(
        &mut self,
        ts: i64,
        stream: Option<usize>,
        backward: bool,
    ) -> Result<(), Msg> {
        let flags = if backward { ffi::AVSEEK_FLAG_BACKWARD } else { 0 };
        let index = stream.map_or(-1, |s| s as i32);
        // SAFETY: a valid, open format context.
        let ret = unsafe { ffi::av_seek_frame(self.input.as_mut_ptr(), index, ts, flags) };
        if ret < 0 {
            return Err(AvFault::Seek { ts, reason: ffmpeg::Error::from(ret).to_string() });
        }
        Ok(())
    }

    /// A decoder for stream `index` (single-threaded, as the reference opens its containers).
    pub(crate) fn decoder(&self, index: usize) -> Result<ffmpeg::decoder::Opened, Msg> {
        let stream = self.input.stream(index).ok_or(AvFault::Missing("stream"))?;
        let mut context = CodecContext::from_parameters(stream.parameters())
            .map_err(|e| AvFault::Unsupported(e.to_string()))?;
        // SAFETY: a valid, unopened codec context.
        unsafe { (*context.as_mut_ptr()).pkt_timebase = stream.time_base().into() };
        if context.id() == ffmpeg::codec::Id::FLAC {
            // A FLAC frame whose checksum fails is an error, not a frame concealed into the
            // clip (each frame carries a CRC).
            // SAFETY: as above.
            unsafe {
                (*context.as_mut_ptr()).err_recognition |= ffi::AV_EF_CRCCHECK | ffi::AV_EF_EXPLODE;
            }
        }
        let codec = ffmpeg::decoder::find(context.id()).ok_or_else(|| {
            AvFault::Unsupported(format!("no decoder for codec {:?}", context.id()))
        })?;
        context.decoder().open_as(codec).map_err(|e| AvFault::Unsupported(e.to_string()))
    }

    /// Reads the next packet of stream `index`; `None` at the end.
    pub(crate) fn next_packet(&mut self, index: usize) -> Result<Option<Packet>, Msg> {
        loop {
            let mut packet = Packet::empty();
            match packet.read(&mut self.input) {
                Ok(()) if packet.stream() == index => {
                    self.timing.packet(&mut packet, self.stream_ptr(index), index);
                    return Ok(Some(packet));
                }
                Ok(()) => {}
                Err(ffmpeg::Error::Eof) => return Ok(None),
                Err(e) => return Err(AvFault::Read(e.to_string())),
            }
        }
    }
}

/// A decoded frame type (video or audio) with the timing the readers need.
pub(crate) trait Timed: std::ops::DerefMut<Target = ffmpeg::Frame> {
    fn empty() -> Self;
    fn ts(&self) -> Option<i64>;
    /// `frame.duration` as PyAV gives it (the packet duration FFmpeg carries on the frame).
    fn duration(&self) -> i64;
}

impl Timed for frame::Video {
    fn empty() -> Self {
        frame::Video::empty()
    }
    fn ts(&self) -> Option<i64> {
        (**self).pts()
    }
    fn duration(&self) -> i64 {
        self.packet().duration
    }
}

impl Timed for frame::Audio {
    fn empty() -> Self {
        frame::Audio::empty()
    }
    fn ts(&self) -> Option<i64> {
        (**self).pts()
    }
    fn duration(&self) -> i64 {
        self.packet().duration
    }
}

/// PyAV's `container.decode(<kind>=0)` generator for one stream: packets are demuxed and
/// decoded one at a time, all frames a packet gives are queued (and survive a seek), and at
/// the end of the container the decoder is drained once, after which the iterator stays
/// exhausted, whatever seeks follow.
pub(crate) struct FrameIter<F: Timed> {
    pub(crate) stream: usize,
    decoder: ffmpeg::decoder::Opened,
    pending: VecDeque<F>,
    /// Packets read ahead of the decoder, decoded before any further packet is read.
    queued: VecDeque<Packet>,
    exhausted: bool,
    /// Whether a packet was sent: PyAV flushes only decoders it has opened, at first use.
    used: bool,
}

impl<F: Timed> FrameIter<F> {
    pub(crate) fn new(container: &Container, stream: usize) -> Result<Self, Msg> {
        Ok(FrameIter {
            stream,
            decoder: container.decoder(stream)?,
            pending: VecDeque::new(),
            queued: VecDeque::new(),
            exhausted: false,
            used: false,
        })
    }

    /// Flushes the decoder after a seek (PyAV's `flush_buffers`); queued frames stay, packets
    /// read ahead (from before the seek) go.
    pub(crate) fn flush(&mut self) {
        self.queued.clear();
        if self.used {
            self.decoder.flush();
        }
    }

    /// A fresh generator on the same decoder: nothing queued, not exhausted.
    pub(crate) fn restart(&mut self) {
        self.pending.clear();
        self.queued.clear();
        self.exhausted = false;
    }

    /// Whether nothing is queued and the container is not exhausted (the state right after a
    /// seek from an unexhausted iterator).
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.queued.is_empty() && !self.exhausted
    }

    /// Packets (of this stream, read from the container) to decode before reading on.
    pub(crate) fn queue_packets(&mut self, packets: VecDeque<Packet>) {
        self.queued = packets;
    }

    /// Puts a frame back, to be given out next.
    pub(crate) fn push_front(&mut self, frame: F) {
        self.pending.push_front(frame);
    }

    /// Back to idle: nothing queued, not exhausted (the caller seeks and flushes next).
    pub(crate) fn reset(&mut self) {
        self.pending.clear();
        self.queued.clear();
        self.exhausted = false;
    }

    /// Takes every frame the decoder has ready; an error other than "needs more input" or "at
    /// the end" is a decode error (a corrupt frame), not the end of the frames.
    fn drain(&mut self) -> Result<(), Msg> {
        loop {
            let mut frame = F::empty();
            match self.decoder.receive_frame(&mut frame) {
                Ok(()) => self.pending.push_back(frame),
                Err(ffmpeg::Error::Eof) => return Ok(()),
                Err(ffmpeg::Error::Other { errno }) if errno == ffi::EAGAIN => return Ok(()),
                Err(e) => return Err(AvFault::Decode(e.to_string())),
            }
        }
    }

    /// The next frame, `None` once the container is exhausted.
    pub(crate) fn next(&mut self, c: &mut Container) -> Result<Option<F>, Msg> {
        loop {
            if let Some(f) = self.pending.pop_front() {
                return Ok(Some(f));
            }
            if self.exhausted {
                return Ok(None);
            }
            let packet = match self.queued.pop_front() {
                Some(p) => Some(p),
                None => c.next_packet(self.stream)?,
            };
            match packet {
                Some(packet) => {
                    self.used = true;
                    self.decoder
                        .send_packet(&packet)
                        .map_err(|e| AvFault::Decode(e.to_string()))?;
                    self.drain()?;
                }
                None => {
                    self.exhausted = true;
                    // The decoder may refuse the drain request when it holds nothing. Drained,
                    // it takes packets again only after a flush (a clip after one that started
                    // past the end).
                    self.used = true;
                    let _ = self.decoder.send_eof();
                    self.drain()?;
                }
            }
        }
    }
}
