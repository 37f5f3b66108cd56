//! Audio parts (wav, flac, mp3, ogg/vorbis): fully decoded to `f32` PCM, with the AV decoder
//! (FFmpeg, as the reference decodes audio) where the `video` feature links it, with symphonia
//! otherwise.

#[cfg(not(feature = "video"))]
use std::io::Cursor;

use bytes::Bytes;
#[cfg(not(feature = "video"))]
use symphonia::core::{
    codecs::audio::AudioDecoderOptions,
    errors::Error as SymphoniaError,
    formats::{FormatOptions, TrackType, probe::Hint},
    io::MediaSourceStream,
    meta::MetadataOptions,
};

use super::tensor::{Tensor, TensorData};

/// Decoded audio: all samples of the default audio track.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    /// Samples per second.
    pub sample_rate: u32,
    /// `f32` samples in `[-1, 1]`, shape `[channels, frames]` (the reference's
    /// `(channels, samples)` audio tensors).
    pub samples: Tensor,
}

impl Audio {
    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.samples.shape.first().copied().unwrap_or(0)
    }

    /// Number of samples per channel.
    pub fn frames(&self) -> usize {
        self.samples.shape.get(1).copied().unwrap_or(0)
    }

    /// Duration in seconds.
    pub fn duration(&self) -> f64 {
        if self.sample_rate == 0 { 0.0 } else { self.frames() as f64 / f64::from(self.sample_rate) }
    }
}

/// A decoded stream must hold samples, and as many as its header declares where it declares an
/// exact length (`declared`).
#[cfg(not(feature = "video"))]
fn check_length(frames: u64, declared: Option<u64>) -> Result<(), String> {
    match declared {
        Some(n) if frames != n => Err(format!(
            "corrupt audio: the stream decodes to {frames} samples per channel where its header \
             declares {n}"
        )),
        None if frames == 0 => {
            Err("corrupt audio: the stream decodes to no samples (truncated or not audio)"
                .to_owned())
        }
        _ => Ok(()),
    }
}

/// Decodes the first audio stream of `data` whole with the AV decoder (FFmpeg), as `f32` in
/// [-1, 1); the container is found from the content.
#[cfg(feature = "video")]
pub(crate) fn decode_audio(data: &Bytes, _extension: &str) -> Result<Audio, String> {
    let (sample_rate, clip) = crate::av::AvDecoder::new(data.clone(), "")
        .decode_audio()
        .map_err(|e| e.fault.to_string())?;
    let samples = Tensor {
        shape: vec![clip.channels, clip.samples],
        data: TensorData::F32(clip.data.pcm_f32().ok_or("audio samples of no PCM type")?),
    };
    Ok(Audio { sample_rate, samples })
}

/// Decodes the default audio track of `data` with symphonia; `extension` (`wav`, `flac`, ...)
/// is a hint only, the container is found from the content.
#[cfg(not(feature = "video"))]
pub(crate) fn decode_audio(data: &Bytes, extension: &str) -> Result<Audio, String> {
    let mss = MediaSourceStream::new(Box::new(Cursor::new(data.clone())), Default::default());
    let mut hint = Hint::new();
    hint.with_extension(extension);
    let mut format = symphonia::default::get_probe()
        .probe(&hint, mss, FormatOptions::default(), MetadataOptions::default())
        .map_err(|e| format!("not a readable audio container: {e}"))?;
    // FLAC (STREAMINFO) and WAV (the data chunk) state their exact length; a stream that decodes
    // to less is corrupt or cut (symphonia skips to the next frame it can sync to, or stops).
    let exact_length = matches!(format.format_info().short_name, "flac" | "wave");
    let track = format.default_track(TrackType::Audio).ok_or("no audio track")?;
    let track_id = track.id;
    let declared = track.num_frames.filter(|_| exact_length);
    let params = track
        .codec_params
        .as_ref()
        .and_then(|p| p.audio())
        .ok_or("the audio track has no codec parameters")?;
    let mut sample_rate = params.sample_rate.unwrap_or(0);
    let mut decoder = symphonia::default::get_codecs()
        .make_audio_decoder(params, &AudioDecoderOptions::default())
        .map_err(|e| format!("unsupported audio codec: {e}"))?;
    let mut planes: Vec<Vec<f32>> = Vec::new();
    let mut scratch: Vec<Vec<f32>> = Vec::new();
    loop {
        let packet = match format.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            // A chained stream (a second logical OGG stream) ends the first track.
            Err(SymphoniaError::ResetRequired) => break,
            Err(e) => return Err(format!("cannot read audio packet: {e}")),
        };
        if packet.track_id != track_id {
            continue;
        }
        let buf = decoder.decode(&packet).map_err(|e| format!("cannot decode audio: {e}"))?;
        if sample_rate == 0 {
            sample_rate = buf.spec().rate();
        }
        buf.copy_to_vecs_planar::<f32>(&mut scratch);
        if planes.is_empty() {
            planes.resize(scratch.len(), Vec::new());
        }
        if scratch.len() != planes.len() {
            return Err("the number of audio channels changes within the stream".to_owned());
        }
        for (plane, new) in planes.iter_mut().zip(&scratch) {
            plane.extend_from_slice(new);
        }
    }
    if sample_rate == 0 {
        return Err("the audio stream has sample rate 0".to_owned());
    }
    let channels = planes.len();
    let frames = planes.first().map_or(0, Vec::len);
    check_length(frames as u64, declared)?;
    let samples = Tensor {
        shape: vec![channels, frames],
        data: TensorData::F32(planes.into_iter().flatten().collect()),
    };
    Ok(Audio { sample_rate, samples })
}
