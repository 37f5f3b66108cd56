//! [`MediaFilter`]: which entries a media run looks at, and whether each is an image or
//! audio/video.

use super::fnmatch::fnmatch;
use crate::filetype::{self, Kind};
use crate::{Error, Result};
use energon_index::media::MediaStrategy;

/// Last extensions (lower case) taken for images by the extension strategy.
pub const IMAGE_EXTENSIONS: &[&str] =
    &["bmp", "gif", "ico", "j2k", "jp2", "jpx", "jpeg", "jpg", "png", "tif", "tiff", "webp"];

/// Last extensions (lower case) taken for audio or video by the extension strategy.
pub const AV_EXTENSIONS: &[&str] =
    &["aac", "avi", "flac", "m4a", "m4v", "mkv", "mov", "mp3", "mp4", "ogg", "wav", "webm"];

/// The kind of media an entry is (`media_metadata.metadata_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// `image`.
    Image,
    /// `av`: audio, video, or both.
    Av,
}

/// The strategy of one media run, with its glob patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaFilter {
    strategy: MediaStrategy,
    patterns: Vec<String>,
}

impl MediaFilter {
    /// A filter of `strategy`; `patterns` are only used (and needed) by [`MediaStrategy::Glob`].
    pub fn new(strategy: MediaStrategy, patterns: Vec<String>) -> Result<Self> {
        if strategy == MediaStrategy::Glob && patterns.is_empty() {
            return Err(config("--media-metadata-by-glob needs at least one pattern"));
        }
        Ok(MediaFilter { strategy, patterns })
    }

    /// The filter chosen by the three flags `--media-metadata-by-glob PATTERNS`,
    /// `--media-metadata-by-header` and `--media-metadata-by-extension`; exactly one must be
    /// set. Glob patterns are separated by commas.
    pub fn from_flags(glob: Option<&str>, header: bool, extension: bool) -> Result<Self> {
        let glob = glob.filter(|g| !g.is_empty());
        let n = usize::from(glob.is_some()) + usize::from(header) + usize::from(extension);
        if n != 1 {
            return Err(config(
                "exactly one of --media-metadata-by-glob, --media-metadata-by-header and \
                 --media-metadata-by-extension must be given (separate several glob patterns by \
                 commas)",
            ));
        }
        match glob {
            Some(glob) => {
                MediaFilter::new(MediaStrategy::Glob, glob.split(',').map(str::to_owned).collect())
            }
            None if header => MediaFilter::new(MediaStrategy::Header, Vec::new()),
            None => MediaFilter::new(MediaStrategy::Extension, Vec::new()),
        }
    }

    /// The strategy.
    pub fn strategy(&self) -> MediaStrategy {
        self.strategy
    }

    /// The glob patterns (empty for the other strategies).
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// The patterns as stored in `media_filters.patterns`: comma-joined, empty for the other
    /// strategies.
    pub fn patterns_joined(&self) -> String {
        self.patterns.join(",")
    }

    /// Whether an entry of this name may be media, before its content is read: always for
    /// the header strategy; a known last extension for the extension strategy; a glob match
    /// on the lower-cased name for the glob strategy.
    pub fn considers(&self, name: &str) -> bool {
        match self.strategy {
            MediaStrategy::Header => true,
            MediaStrategy::Extension => type_by_extension(name).is_some(),
            MediaStrategy::Glob => {
                let lower = name.to_lowercase();
                self.patterns.iter().any(|p| fnmatch(&lower, p))
            }
        }
    }

    /// The media type of an entry, or `None` if it is not media. `data` is the content (only
    /// its first 262 bytes are looked at, and only by the header and glob strategies).
    ///
    /// - Extension: by the name's last extension.
    /// - Header: by the content's magic bytes (images, video and audio as the `filetype`
    ///   package recognizes them), else by the extension.
    /// - Glob: entries whose lower-cased name matches a pattern, typed like the header
    ///   strategy. (The reference fails on every glob match; see docs/compat.md.)
    pub fn media_type(&self, name: &str, data: &[u8]) -> Option<MediaType> {
        match self.strategy {
            MediaStrategy::Extension => type_by_extension(name),
            MediaStrategy::Header => sniff_media_type(data).or_else(|| type_by_extension(name)),
            MediaStrategy::Glob => {
                if !self.considers(name) {
                    return None;
                }
                sniff_media_type(data).or_else(|| type_by_extension(name))
            }
        }
    }
}

fn config(msg: &str) -> Error {
    Error::Index(energon_index::Error::Config(msg.to_owned()))
}

/// Python's `PurePosixPath(name).suffix` without the dot, lower-cased: the part of the last
/// path component after its last dot, empty when that dot is the first or last character.
pub(crate) fn last_suffix(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    match base.rfind('.') {
        Some(i) if i > 0 && i + 1 < base.len() => base[i + 1..].to_lowercase(),
        _ => String::new(),
    }
}

/// The media type of a name by its last extension.
pub(crate) fn type_by_extension(name: &str) -> Option<MediaType> {
    let ext = last_suffix(name);
    if IMAGE_EXTENSIONS.contains(&ext.as_str()) {
        Some(MediaType::Image)
    } else if AV_EXTENSIONS.contains(&ext.as_str()) {
        Some(MediaType::Av)
    } else {
        None
    }
}

/// The media type `filetype`'s guess of the content implies (its MIME type's `image/`,
/// `audio/` or `video/`), as the reference's header strategy takes it.
fn sniff_media_type(data: &[u8]) -> Option<MediaType> {
    match filetype::guess(data)?.1 {
        Kind::Image => Some(MediaType::Image),
        Kind::Audio | Kind::Video => Some(MediaType::Av),
        Kind::Other => None,
    }
}
