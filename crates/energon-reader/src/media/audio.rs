//! Audio metadata with symphonia: rate, channels, and the sample count and duration found by
//! decoding the whole first audio track (as the reference does with FFmpeg).

use std::io::Cursor;

use symphonia::core::{
    codecs::audio::AudioDecoderOptions,
    errors::Error as SymphoniaError,
    formats::{FormatOptions, TrackType, probe::Hint},
    io::MediaSourceStream,
    meta::MetadataOptions,
};

use super::{AvMetadata, filter::last_suffix};

/// Last extensions of the containers symphonia is built to read here.
#[cfg(not(feature = "video"))]
pub(crate) const SYMPHONIA_EXTENSIONS: &[&str] = &["wav", "flac", "mp3", "ogg"];

/// Reads the audio metadata of `data`; `name` gives a container hint.
///
/// `audio_duration` is the decoded sample count times `1 / sample_rate`, computed as the
/// reference computes it (`ticks * float(time_base)` with a time base of one sample).
pub(crate) fn probe_audio(name: &str, data: &[u8]) -> Result<AvMetadata, String> {
    // The content is copied once: symphonia's media source must own its bytes.
    let mss = MediaSourceStream::new(Box::new(Cursor::new(data.to_vec())), Default::default());
    let mut hint = Hint::new();
    let ext = last_suffix(name);
    if !ext.is_empty() {
        hint.with_extension(&ext);
    }
    let options = FormatOptions::default();
    let mut format = symphonia::default::get_probe()
        .probe(&hint, mss, options, MetadataOptions::default())
        .map_err(|e| format!("not a readable audio file: {e}"))?;
    let track = format.default_track(TrackType::Audio).ok_or("no audio track")?;
    let track_id = track.id;
    let params = track
        .codec_params
        .as_ref()
        .and_then(|p| p.audio())
        .ok_or("the audio track has no codec parameters")?;
    let mut sample_rate = params.sample_rate;
    let mut channels = params.channels.as_ref().map(|c| c.count());
    let mut decoder = symphonia::default::get_codecs()
        .make_audio_decoder(params, &AudioDecoderOptions::default())
        .map_err(|e| format!("unsupported audio codec: {e}"))?;
    let mut n_samples: u64 = 0;
    loop {
        let packet = match format.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            // A chained stream (a second logical Ogg stream) ends the first track.
            Err(SymphoniaError::ResetRequired) => break,
            Err(e) => return Err(format!("cannot read audio packet: {e}")),
        };
        if packet.track_id != track_id {
            continue;
        }
        let buf = decoder.decode(&packet).map_err(|e| format!("cannot decode audio: {e}"))?;
        sample_rate = sample_rate.or(Some(buf.spec().rate()));
        channels = channels.or(Some(buf.spec().channels().count()));
        n_samples += buf.frames() as u64;
    }
    let sample_rate = sample_rate.filter(|&r| r > 0).ok_or("the audio has no sample rate")?;
    let channels = channels.ok_or("the audio has no channel layout")?;
    Ok(AvMetadata {
        audio_duration: Some(n_samples as f64 * (1.0 / f64::from(sample_rate))),
        audio_channels: Some(u32::try_from(channels).map_err(|_| "too many channels")?),
        audio_sample_rate: Some(sample_rate),
        audio_num_samples: Some(n_samples),
        ..AvMetadata::default()
    })
}
