//! What goes wrong decoding a media part (`AvFault`), and the public error that adds where the
//! part lies (`AvError`).

/// What went wrong decoding a media part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AvFault {
    /// FFmpeg cannot open the bytes as a container (or there are none).
    #[error("FFmpeg cannot open it: {0}")]
    Open(String),
    /// The media lacks what the request needs (a stream, its sample rate, time base or frame
    /// rate, a frame's timestamp or sample format).
    #[error("{0}")]
    Missing(&'static str),
    /// No decoder for a stream's codec.
    #[error("unsupported codec: {0}")]
    Unsupported(String),
    /// Seeking to a timestamp failed.
    #[error("cannot seek to {ts}: {reason}")]
    Seek {
        /// The timestamp.
        ts: i64,
        /// FFmpeg's reason.
        reason: String,
    },
    /// Reading a packet failed.
    #[error("cannot read a packet: {0}")]
    Read(String),
    /// The decoder refused a packet or gave an error for a frame (a corrupt frame).
    #[error("cannot decode: {0}")]
    Decode(String),
    /// A whole audio stream decodes to fewer samples than its header declares (a cut or corrupt
    /// file).
    #[error(
        "corrupt audio: the stream decodes to {decoded} samples per channel where its header \
         declares {declared}"
    )]
    ShortAudio {
        /// Samples per channel decoded.
        decoded: u64,
        /// Samples per channel the header declares.
        declared: u64,
    },
    /// A whole audio stream decodes to no samples.
    #[error("corrupt audio: the stream decodes to no samples (truncated or not audio)")]
    NoSamples,
    /// The sample type of an audio stream changes inside it.
    #[error("the audio sample type changed inside the stream ({now} after {before})")]
    SampleTypeChanged {
        /// The type before.
        before: &'static str,
        /// The type now.
        now: &'static str,
    },
    /// Converting frames to RGB failed.
    #[error("cannot convert frames to RGB: {0}")]
    Convert(String),
    /// A request the media cannot answer (a clip that starts at no number, an index entry past
    /// the end).
    #[error("{0}")]
    Request(String),
}

/// A media part that could not be decoded, with where it lies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot decode media {origin}: {fault}")]
pub struct AvError {
    /// Where the media lies (dataset, shard, key and part, as the caller knows them).
    pub origin: String,
    /// What went wrong.
    #[source]
    pub fault: AvFault,
}
