//! Media metadata in `index.sqlite`: the `metadata_json` encodings and the writer of the media
//! tables (`media_metadata`, `media_filters`).
//!
//! - [`Metadata`] ([`ImageMetadata`], [`AvMetadata`]) is one row's typed value; [`Metadata::to_json`]
//!   writes it exactly as megatron-energon does (`json.dumps(..., separators=(",", ":"))` of the
//!   dataclass fields in declaration order, `None` fields left out, Python float `repr`).
//! - [`MediaStrategy`] names the filter a run used, as stored in `media_filters.strategy`.
//! - [`MediaIndexWriter`] adds rows to the media tables of an existing `index.sqlite` (or creates
//!   a media-only one for a plain folder). It works on a copy next to the database and renames it
//!   into place on [`finish`](MediaIndexWriter::finish), so readers never see a half-written index
//!   and a failed run leaves the old one untouched.

use std::{
    fmt::Write as _,
    fs::{self, File},
    path::{Path, PathBuf},
};

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use crate::{
    Error, Result,
    fsutil::process_tmp_path,
    sqlite::{
        MediaMetadata,
        schema::{
            MEDIA_FILTERS, MEDIA_FILTERS_DDL, MEDIA_METADATA, MEDIA_METADATA_DDL, table_exists,
        },
    },
    yaml::pynum::py_float_repr,
};

#[cfg(test)]
mod tests;

/// How a media run chose the entries it inspected (`media_filters.strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MediaStrategy {
    /// By the file name's last extension (`--media-metadata-by-extension`).
    Extension,
    /// By the content's leading bytes (`--media-metadata-by-header`).
    Header,
    /// By glob patterns on the lower-cased name (`--media-metadata-by-glob`).
    Glob,
}

impl MediaStrategy {
    /// The name stored in `media_filters.strategy` (`EXTENSION`, `HEADER`, `GLOB`).
    pub fn as_str(self) -> &'static str {
        match self {
            MediaStrategy::Extension => "EXTENSION",
            MediaStrategy::Header => "HEADER",
            MediaStrategy::Glob => "GLOB",
        }
    }
}

/// The `image` metadata of one entry, read from the image's header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMetadata {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The Pillow format name (`JPEG`, `PNG`, `GIF`, `BMP`, `TIFF`, `WEBP`, `ICO`, `JPEG2000`).
    pub format: String,
    /// The Pillow mode (`RGB`, `RGBA`, `L`, `LA`, `P`, `1`, `I;16`, `CMYK`, ...).
    pub mode: String,
}

/// The `av` metadata of one audio or video entry. Fields that do not apply (no video stream, no
/// audio stream) or could not be determined are `None` and left out of the JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AvMetadata {
    /// Duration of the first video stream in seconds (after subtracting its start time).
    pub video_duration: Option<f64>,
    /// Number of video packets with a timestamp in the first video stream.
    pub video_num_frames: Option<u64>,
    /// Average frame rate of the first video stream.
    pub video_fps: Option<f64>,
    /// Width of the first video frame.
    pub video_width: Option<u32>,
    /// Height of the first video frame.
    pub video_height: Option<u32>,
    /// Duration of the first audio stream in seconds (after subtracting its start time).
    pub audio_duration: Option<f64>,
    /// Channels of the first audio stream.
    pub audio_channels: Option<u32>,
    /// Sample rate of the first audio stream in Hz.
    pub audio_sample_rate: Option<u32>,
    /// Samples per channel of the first audio stream (counted by decoding it).
    pub audio_num_samples: Option<u64>,
}

/// The metadata of one media entry, as stored in a `media_metadata` row.
#[derive(Debug, Clone, PartialEq)]
pub enum Metadata {
    /// `metadata_type` `image`.
    Image(ImageMetadata),
    /// `metadata_type` `av` (audio, video, or both).
    Av(AvMetadata),
}

impl Metadata {
    /// The stored `metadata_type`: `image` or `av`.
    pub fn metadata_type(&self) -> &'static str {
        match self {
            Metadata::Image(_) => "image",
            Metadata::Av(_) => "av",
        }
    }

    /// The stored `metadata_json`: compact JSON with the reference's field order, `None` fields
    /// left out, floats as Python writes them (`1.0`, `0.1`, `1e-05`), non-ASCII escaped.
    pub fn to_json(&self) -> String {
        let mut out = JsonObject::default();
        match self {
            Metadata::Image(m) => {
                out.int("width", Some(u64::from(m.width)));
                out.int("height", Some(u64::from(m.height)));
                out.string("format", &m.format);
                out.string("mode", &m.mode);
            }
            Metadata::Av(m) => {
                out.float("video_duration", m.video_duration);
                out.int("video_num_frames", m.video_num_frames);
                out.float("video_fps", m.video_fps);
                out.int("video_width", m.video_width.map(u64::from));
                out.int("video_height", m.video_height.map(u64::from));
                out.float("audio_duration", m.audio_duration);
                out.int("audio_channels", m.audio_channels.map(u64::from));
                out.int("audio_sample_rate", m.audio_sample_rate.map(u64::from));
                out.int("audio_num_samples", m.audio_num_samples);
            }
        }
        out.finish()
    }

    /// Parses a stored row. `path` (the database) is named in errors: an unknown
    /// `metadata_type`, JSON that is not an object, a missing image field or a field of the wrong
    /// type. Unknown fields are ignored (newer writers may add some).
    pub fn from_row(path: &Path, entry_key: &str, row: &MediaMetadata) -> Result<Self> {
        let bad = |reason: String| Error::BadMetadata {
            path: path.to_owned(),
            reason: format!("media_metadata row {entry_key:?}: {reason}"),
        };
        let value: Value = serde_json::from_str(&row.metadata_json)
            .map_err(|e| bad(format!("metadata_json is not JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(bad("metadata_json is not a JSON object".to_owned()));
        };
        let uint = |name: &str| -> Result<Option<u64>> {
            match map.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => {
                    v.as_u64().map(Some).ok_or_else(|| bad(format!("{name} is not an integer")))
                }
            }
        };
        let u32_field = |name: &str| -> Result<Option<u32>> {
            uint(name)?
                .map(|v| u32::try_from(v).map_err(|_| bad(format!("{name} is out of range"))))
                .transpose()
        };
        let float = |name: &str| -> Result<Option<f64>> {
            match map.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => {
                    v.as_f64().map(Some).ok_or_else(|| bad(format!("{name} is not a number")))
                }
            }
        };
        let string = |name: &str| -> Result<String> {
            map.get(name)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| bad(format!("{name} is missing or not a string")))
        };
        match row.metadata_type.as_str() {
            "image" => Ok(Metadata::Image(ImageMetadata {
                width: u32_field("width")?.ok_or_else(|| bad("width is missing".to_owned()))?,
                height: u32_field("height")?.ok_or_else(|| bad("height is missing".to_owned()))?,
                format: string("format")?,
                mode: string("mode")?,
            })),
            "av" => Ok(Metadata::Av(AvMetadata {
                video_duration: float("video_duration")?,
                video_num_frames: uint("video_num_frames")?,
                video_fps: float("video_fps")?,
                video_width: u32_field("video_width")?,
                video_height: u32_field("video_height")?,
                audio_duration: float("audio_duration")?,
                audio_channels: u32_field("audio_channels")?,
                audio_sample_rate: u32_field("audio_sample_rate")?,
                audio_num_samples: uint("audio_num_samples")?,
            })),
            other => Err(bad(format!("unknown metadata_type {other:?} (expected image or av)"))),
        }
    }
}

/// Builds a compact JSON object field by field, in the order given.
#[derive(Debug, Default)]
struct JsonObject {
    out: String,
}

impl JsonObject {
    fn key(&mut self, name: &str) {
        self.out.push(if self.out.is_empty() { '{' } else { ',' });
        push_json_string(&mut self.out, name);
        self.out.push(':');
    }

    fn int(&mut self, name: &str, value: Option<u64>) {
        if let Some(value) = value {
            self.key(name);
            // Writing to a String cannot fail.
            let _ = write!(self.out, "{value}");
        }
    }

    fn float(&mut self, name: &str, value: Option<f64>) {
        if let Some(value) = value {
            self.key(name);
            // Python's json module writes non-finite floats as JavaScript literals.
            let text = if value.is_nan() {
                "NaN".to_owned()
            } else if value.is_infinite() {
                if value > 0.0 { "Infinity".to_owned() } else { "-Infinity".to_owned() }
            } else {
                py_float_repr(value)
            };
            self.out.push_str(&text);
        }
    }

    fn string(&mut self, name: &str, value: &str) {
        self.key(name);
        push_json_string(&mut self.out, value);
    }

    fn finish(mut self) -> String {
        if self.out.is_empty() {
            self.out.push('{');
        }
        self.out.push('}');
        self.out
    }
}

/// Appends `s` as a JSON string the way Python's `json.dumps` writes it (`ensure_ascii`: every
/// non-ASCII character as `\uXXXX`, surrogate pairs above U+FFFF).
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// What to do with media tables that the database already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableMode {
    /// Keep their rows and add to them (`energon prepare-media`): metadata rows are
    /// `INSERT OR REPLACE`, the filter row `INSERT OR IGNORE`.
    Add,
    /// Drop and recreate both tables first (`energon prepare --media-metadata-by-...`); the filter
    /// ids start again at 1.
    Replace,
}

/// Writes the media tables of one `index.sqlite`.
///
/// [`open`](Self::open) copies the existing database (if any) to `<name>.tmp` in the same folder
/// and starts one transaction there; rows are added with [`add`](Self::add);
/// [`finish`](Self::finish) records the filter, commits, syncs and renames the copy over the
/// database. A writer dropped without `finish` removes its copy and changes nothing.
#[derive(Debug)]
pub struct MediaIndexWriter {
    conn: Option<Connection>,
    path: PathBuf,
    tmp: PathBuf,
    n_rows: u64,
    /// Set once the copy was renamed into place; until then dropping removes it.
    done: bool,
}

impl MediaIndexWriter {
    /// Starts writing media tables into the database at `path`, creating a media-only database
    /// if there is none (a plain folder's `.nv-meta/index.sqlite`).
    ///
    /// An existing database keeps every other table as it is. A new database gets the
    /// permission bits of the folder it is in, with owner read and write added and execute bits
    /// removed, as the reference does for a filesystem dataset.
    pub fn open(path: &Path, mode: TableMode) -> Result<Self> {
        let tmp = process_tmp_path(path);
        let _ = fs::remove_file(&tmp);
        let existed = match fs::metadata(path) {
            Ok(meta) if meta.is_file() => true,
            Ok(_) => {
                return Err(Error::NotADataset {
                    path: path.to_owned(),
                    reason: "index.sqlite is not a regular file".to_owned(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(Error::io("cannot open", path, e)),
        };
        if existed {
            fs::copy(path, &tmp).map_err(|e| Error::io("cannot copy", path, e))?;
        } else if let Some(mode) = path.parent().and_then(crate::fsutil::mode_like) {
            File::create(&tmp).map_err(|e| Error::io("cannot create", &tmp, e))?;
            set_mode(&tmp, mode & 0o666);
        }
        let mut writer =
            MediaIndexWriter { conn: None, path: path.to_owned(), tmp, n_rows: 0, done: false };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn =
            Connection::open_with_flags(&writer.tmp, flags).map_err(|e| Error::sqlite(path, e))?;
        let init = || -> rusqlite::Result<()> {
            // A database that is not SQLite fails here, on its first read.
            conn.execute_batch("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; BEGIN")?;
            if mode == TableMode::Replace {
                conn.execute_batch(&format!(
                    "DROP TABLE IF EXISTS {MEDIA_METADATA}; DROP TABLE IF EXISTS {MEDIA_FILTERS};"
                ))?;
            }
            for (name, ddl) in
                [(MEDIA_METADATA, MEDIA_METADATA_DDL), (MEDIA_FILTERS, MEDIA_FILTERS_DDL)]
            {
                if !table_exists(&conn, "main", name)? {
                    conn.execute_batch(ddl)?;
                }
            }
            Ok(())
        };
        if let Err(e) = init() {
            // Name the database the user has, not our copy of it.
            return Err(Error::sqlite(path, e));
        }
        writer.conn = Some(conn);
        Ok(writer)
    }

    /// The database that [`finish`](Self::finish) replaces.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Rows added so far (a replaced row counts again, as in the reference's count).
    pub fn n_rows(&self) -> u64 {
        self.n_rows
    }

    /// Adds (or replaces) the metadata of one entry: `<key>.<part>` in a WebDataset, the path
    /// relative to the root in a plain folder.
    pub fn add(&mut self, entry_key: &str, metadata: &Metadata) -> Result<()> {
        let json = metadata.to_json();
        let conn = self.conn.as_ref().expect("the connection lives until finish or drop");
        conn.prepare_cached(
            "INSERT OR REPLACE INTO media_metadata (entry_key, metadata_type, metadata_json) \
             VALUES (?1, ?2, ?3)",
        )
        .and_then(|mut stmt| stmt.execute((entry_key, metadata.metadata_type(), json.as_str())))
        .map_err(|e| Error::sqlite(&self.path, e))?;
        self.n_rows += 1;
        Ok(())
    }

    /// Records the filter of this run (`INSERT OR IGNORE` of `strategy` and the comma-joined glob
    /// `patterns`, an empty string for the other strategies), commits, and renames the database
    /// into place. Returns the number of rows added.
    pub fn finish(mut self, strategy: MediaStrategy, patterns: &str) -> Result<u64> {
        let conn = self.conn.take().expect("the connection lives until finish or drop");
        let commit = || -> rusqlite::Result<()> {
            conn.execute(
                "INSERT OR IGNORE INTO media_filters (strategy, patterns) VALUES (?1, ?2)",
                (strategy.as_str(), patterns),
            )?;
            conn.execute_batch("COMMIT")?;
            conn.execute_batch("PRAGMA journal_mode = DELETE")?;
            Ok(())
        };
        commit().map_err(|e| Error::sqlite(&self.path, e))?;
        conn.close().map_err(|(_, e)| Error::sqlite(&self.path, e))?;
        File::open(&self.tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io("cannot sync", &self.tmp, e))?;
        fs::rename(&self.tmp, &self.path)
            .map_err(|e| Error::io("cannot rename into place", &self.path, e))?;
        self.done = true;
        Ok(self.n_rows)
    }
}

impl Drop for MediaIndexWriter {
    fn drop(&mut self) {
        // Close the connection before removing its file.
        drop(self.conn.take());
        if !self.done {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(mode)) {
        tracing::debug!("cannot set the mode of {}: {e}", path.display());
    }
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) {}
