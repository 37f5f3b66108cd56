//! Media metadata: which entries are media, and their properties read from the content.
//!
//! This is what `energon prepare-media` and `prepare --media-metadata-by-...` store in the media
//! tables of `index.sqlite` (the reference's media tables):
//!
//! - [`MediaFilter`]: the strategy of a run (by extension, by glob patterns, by content header)
//!   and the decision whether an entry is an image, audio/video, or not media.
//! - [`probe_image`]: width, height, Pillow format name and Pillow mode, read from the image's
//!   headers without decoding pixels.
//! - [`probe_av`]: durations, frame counts, rate, sizes, channels and sample counts of audio
//!   (symphonia) and, with the cargo feature `video`, of video containers (FFmpeg).
//! - [`prepare`]: the parallel pass over all shards of a prepared WebDataset, or over all files
//!   of a plain folder, that writes the tables.
//!
//! Entries that look like media but cannot be read (a truncated header, an unknown format, a
//! codec that is not supported) are reported as [`Skipped`] with a reason; they never stop a
//! run.

// Audio metadata without FFmpeg (and, in tests, the check that both read WAV alike).
#[cfg(any(test, not(feature = "video")))]
mod audio;
mod filter;
mod fnmatch;
mod image;
pub mod prepare;
#[cfg(any(test, feature = "synth"))]
pub mod synth;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use energon_index::media::{AvMetadata, ImageMetadata, MediaStrategy, Metadata};

pub use self::{
    filter::{AV_EXTENSIONS, IMAGE_EXTENSIONS, MediaFilter, MediaType},
    image::{HeaderError, probe_image},
};
use crate::{Result, file_store::FileStore};

/// An entry that was taken for media but whose metadata could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The entry: `<key>.<part>` in a WebDataset, the path relative to the root in a folder.
    pub entry_key: String,
    /// Why it was skipped (`truncated PNG header`, `unsupported audio codec: ...`).
    pub reason: String,
}

/// Where the bytes of an audio or video entry are, for [`probe_av`].
#[derive(Debug, Clone, Copy)]
pub struct AvSource<'a> {
    /// The content.
    pub data: &'a [u8],
    /// The file holding the content and the byte offset of the content in it, when there is
    /// one (FFmpeg reads video containers from the file, seeking as it needs).
    pub file: Option<(&'a Path, u64)>,
}

/// Reads the audio/video metadata of `source`; `name` (the entry name) is a hint for the
/// container format only.
///
/// With the cargo feature `video`, FFmpeg reads every container as the reference's
/// `AVDecoder.get_metadata(get_audio_num_samples=True)` does (one implementation with the
/// loader's `AVDecoder`). Without it, audio in WAV, FLAC, MP3 and Ogg/Vorbis is read with
/// symphonia, decoding every packet to count the samples, and other containers are an error.
#[cfg(feature = "video")]
pub fn probe_av(_name: &str, source: AvSource<'_>) -> Result<AvMetadata, String> {
    crate::av::probe(source).map_err(|e| e.to_string())
}

/// Reads the audio/video metadata of `source`; `name` (the entry name) is a hint for the
/// container format only.
///
/// Without the cargo feature `video`, audio in WAV, FLAC, MP3 and Ogg/Vorbis is read with
/// symphonia, decoding every packet to count the samples as the reference counts them with
/// FFmpeg; other containers (MP4, MKV, WebM, AVI, MOV, M4A, AAC) are reported as an error.
#[cfg(not(feature = "video"))]
pub fn probe_av(name: &str, source: AvSource<'_>) -> Result<AvMetadata, String> {
    audio::probe_audio(name, source.data).map_err(|audio_err| {
        let ext = filter::last_suffix(name);
        if audio::SYMPHONIA_EXTENSIONS.contains(&ext.as_str()) {
            audio_err
        } else {
            format!(
                "{audio_err}; video containers need energon built with the cargo feature \
                 `video` (FFmpeg)"
            )
        }
    })
}

/// Reads the metadata of one entry of type `media_type`.
pub fn probe(media_type: MediaType, name: &str, source: AvSource<'_>) -> Result<Metadata, String> {
    match media_type {
        MediaType::Image => {
            probe_image(source.data).map(Metadata::Image).map_err(|e| e.to_string())
        }
        MediaType::Av => probe_av(name, source).map(Metadata::Av),
    }
}

/// Typed media metadata of file `name` of a store (the reference's
/// `FileStore.get_media_metadata`); `None` when `prepare-media` stored nothing for it.
pub fn media_metadata_of(store: &dyn FileStore, name: &str) -> Result<Option<Metadata>> {
    let Some(row) = store.media_metadata(name)? else { return Ok(None) };
    let db = store.path().join(energon_index::NV_META).join(energon_index::INDEX_SQLITE);
    Ok(Some(Metadata::from_row(&db, name, &row)?))
}
