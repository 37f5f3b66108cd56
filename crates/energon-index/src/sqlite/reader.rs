//! [`SqliteIndex`]: read-only lookups in an existing `index.sqlite`.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row};

use super::schema::{MEDIA_METADATA, get_u64, readonly_uri, table_exists};
use crate::{Error, Result, tar_scan::split_key_part};

/// The layout of an `index.sqlite`, by the energon version that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchemaVersion {
    /// Energon 6.x: `samples` has an `id INTEGER PRIMARY KEY AUTOINCREMENT` column, keys are not
    /// unique, and there is no `sample_parts` table.
    V6,
    /// Energon 7.0-7.2: no `id` column, a `sample_parts` table, keys still not unique.
    V7_0,
    /// Energon 7.3 and later: `sample_key` is `UNIQUE NOT NULL`.
    V7_3,
}

/// Where a whole sample lies in its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLocation {
    /// Position of the shard in `.info.json` `shard_counts` order.
    pub tar_file_id: u64,
    /// Byte offset of the sample's first tar header.
    pub byte_offset: u64,
    /// Bytes up to the next sample (or the end of the last member).
    pub byte_size: u64,
}

/// Where the content of one part (one tar member) lies in its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartLocation {
    /// Position of the shard in `.info.json` `shard_counts` order.
    pub tar_file_id: u64,
    /// Byte offset of the member's content (after its headers).
    pub content_byte_offset: u64,
    /// Content size in bytes.
    pub content_byte_size: u64,
    /// The content offset of a second member of the same name in the same sample, if the tar
    /// stores the part twice (readers refuse such a sample rather than serve either copy).
    pub second_copy: Option<u64>,
}

/// One row of the `samples` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleRow {
    /// Position of the shard in `.info.json` `shard_counts` order.
    pub tar_file_id: u64,
    /// The sample key.
    pub sample_key: String,
    /// 0-based position of the sample within its shard.
    pub sample_index: u64,
    /// Byte offset of the sample's first tar header.
    pub byte_offset: u64,
    /// Bytes up to the next sample (or the end of the last member).
    pub byte_size: u64,
}

/// One row of the `sample_parts` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartRow {
    /// Position of the shard in `.info.json` `shard_counts` order.
    pub tar_file_id: u64,
    /// 0-based position of the sample within its shard.
    pub sample_index: u64,
    /// The part name (extension), e.g. `jpg` or `seg.png`.
    pub part_name: String,
    /// Byte offset of the member's content.
    pub content_byte_offset: u64,
    /// Content size in bytes.
    pub content_byte_size: u64,
}

/// One file of the dataset as `energon mount` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    /// `<sample key>.<part name>`, i.e. the tar member name.
    pub name: String,
    /// Content size in bytes.
    pub size: u64,
    /// Position of the shard in `.info.json` `shard_counts` order.
    pub tar_file_id: u64,
}

/// One row of `media_metadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaMetadata {
    /// `image` or `av`.
    pub metadata_type: String,
    /// Compact JSON with the media's properties, as written by prepare.
    pub metadata_json: String,
}

/// A read-only `index.sqlite`.
///
/// The file is opened as `file:<path>?mode=ro&immutable=1`, as the reference's readers do: SQLite
/// takes no locks and assumes that nobody changes the file while it is open. Lookups take `&self`
/// and may run from several threads at once: each call borrows a connection from a small pool
/// (one connection per concurrent caller, opened on demand and kept for reuse).
#[derive(Debug)]
pub struct SqliteIndex {
    path: PathBuf,
    uri: String,
    version: Option<SchemaVersion>,
    has_sample_parts: bool,
    has_media_metadata: bool,
    idle: Mutex<Vec<Connection>>,
}

impl SqliteIndex {
    /// Opens an index and detects its layout.
    ///
    /// An index without a `samples` table (written by `prepare-media` for a plain folder) opens
    /// fine; the sample lookups then fail with [`Error::Incompatible`].
    pub fn open(path: &Path) -> Result<Self> {
        // A remote index is read from a local copy (fetched once into the cache folder).
        let local =
            crate::storage::local_file(path).map_err(|e| Error::io("cannot open", path, e))?;
        std::fs::metadata(&local).map_err(|e| Error::io("cannot open", path, e))?;
        let uri = readonly_uri(&local, true);
        let conn = connect(&uri).map_err(|e| Error::sqlite(path, e))?;
        let detect = || -> rusqlite::Result<_> {
            let version = detect_version(&conn)?;
            let has_sample_parts = table_exists(&conn, "main", "sample_parts")?;
            let has_media_metadata = table_exists(&conn, "main", MEDIA_METADATA)?;
            Ok((version, has_sample_parts, has_media_metadata))
        };
        let (version, has_sample_parts, has_media_metadata) =
            detect().map_err(|e| Error::sqlite(path, e))?;
        Ok(SqliteIndex {
            path: path.to_owned(),
            uri,
            version,
            has_sample_parts,
            has_media_metadata,
            idle: Mutex::new(vec![conn]),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The layout of the `samples` table, or `None` if there is none (a media-only index).
    pub fn schema_version(&self) -> Option<SchemaVersion> {
        self.version
    }

    /// Whether the index has per-part rows (`sample_parts`, energon 7.0+). Without them, parts
    /// are found by reading the sample's tar headers.
    pub fn has_sample_parts(&self) -> bool {
        self.has_sample_parts
    }

    /// Whether the index has a `media_metadata` table.
    pub fn has_media_metadata(&self) -> bool {
        self.has_media_metadata
    }

    /// Number of samples (`COUNT(*)` of `samples`; duplicate keys of old indexes count twice).
    pub fn sample_count(&self) -> Result<u64> {
        self.require_samples()?;
        self.with_conn(|conn| {
            conn.prepare_cached("SELECT COUNT(*) FROM samples")?
                .query_row([], |row| get_u64(row, 0))
        })
    }

    /// Sum of all sample byte sizes.
    pub fn total_size(&self) -> Result<u64> {
        self.require_samples()?;
        self.with_conn(|conn| {
            conn.prepare_cached("SELECT COALESCE(SUM(byte_size), 0) FROM samples")?
                .query_row([], |row| get_u64(row, 0))
        })
    }

    /// Finds a sample by key. With duplicate keys (indexes older than 7.3) the sample of the
    /// lowest `tar_file_id` (then lowest `sample_index`) wins.
    pub fn sample_by_key(&self, key: &str) -> Result<Option<SampleLocation>> {
        self.require_samples()?;
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT tar_file_id, byte_offset, byte_size FROM samples WHERE sample_key = ?1 \
                 ORDER BY tar_file_id, sample_index LIMIT 1",
            )?
            .query_row([key], |row| {
                Ok(SampleLocation {
                    tar_file_id: get_u64(row, 0)?,
                    byte_offset: get_u64(row, 1)?,
                    byte_size: get_u64(row, 2)?,
                })
            })
            .optional()
        })
    }

    /// Finds one part by its tar member name `<key>.<part>`.
    ///
    /// The name is split with the WebDataset key rule (key = directory prefix + basename up to
    /// its first dot); a name that has no part gives `None`. With duplicate keys the part of the
    /// lowest `tar_file_id` wins. An index without `sample_parts` (energon 6.x) gives
    /// [`Error::Incompatible`]: check [`has_sample_parts`](Self::has_sample_parts) and read the tar
    /// headers of the sample instead.
    pub fn part_by_entry_name(&self, entry_name: &str) -> Result<Option<PartLocation>> {
        self.require_parts()?;
        let Some((key, part)) = split_key_part(entry_name) else { return Ok(None) };
        self.with_conn(|conn| {
            let rows: Vec<(u64, u64, u64, u64)> = conn
                .prepare_cached(
                    "SELECT sp.tar_file_id, sp.sample_index, sp.content_byte_offset, \
                     sp.content_byte_size \
                     FROM samples AS s JOIN sample_parts AS sp \
                     ON sp.tar_file_id = s.tar_file_id AND sp.sample_index = s.sample_index \
                     WHERE s.sample_key = ?1 AND sp.part_name = ?2 \
                     ORDER BY s.tar_file_id, s.sample_index, sp.content_byte_offset LIMIT 2",
                )?
                .query_map([key, part], |row| {
                    Ok((get_u64(row, 0)?, get_u64(row, 1)?, get_u64(row, 2)?, get_u64(row, 3)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
            let Some(&(tar_file_id, sample_index, offset, size)) = rows.first() else {
                return Ok(None);
            };
            let second_copy =
                rows.get(1).filter(|r| (r.0, r.1) == (tar_file_id, sample_index)).map(|r| r.2);
            Ok(Some(PartLocation {
                tar_file_id,
                content_byte_offset: offset,
                content_byte_size: size,
                second_copy,
            }))
        })
    }

    /// The parts of the sample with this key, in tar order (all samples of that key, by
    /// `tar_file_id`, for old indexes with duplicates).
    pub fn parts_of_sample(&self, key: &str) -> Result<Vec<PartRow>> {
        self.require_parts()?;
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT sp.tar_file_id, sp.sample_index, sp.part_name, sp.content_byte_offset, \
                 sp.content_byte_size \
                 FROM samples AS s JOIN sample_parts AS sp \
                 ON sp.tar_file_id = s.tar_file_id AND sp.sample_index = s.sample_index \
                 WHERE s.sample_key = ?1 \
                 ORDER BY sp.tar_file_id, sp.sample_index, sp.content_byte_offset",
            )?
            .query_map([key], part_row)?
            .collect()
        })
    }

    /// All parts of the dataset as `<key>.<part>` names with size and shard, ordered by
    /// `tar_file_id`, `sample_index`, content offset (what `energon mount` lists).
    pub fn list_entries(&self) -> Result<Vec<EntryInfo>> {
        let mut res = Vec::new();
        self.for_each_entry(|entry| {
            res.push(entry);
            Ok(())
        })?;
        Ok(res)
    }

    /// Streams the rows of [`list_entries`](Self::list_entries) to `f` without collecting them;
    /// the first error returned by `f` stops the walk and is returned.
    pub fn for_each_entry(&self, mut f: impl FnMut(EntryInfo) -> Result<()>) -> Result<()> {
        self.for_each_entry_dyn(&mut f)
    }

    fn for_each_entry_dyn(&self, f: &mut dyn FnMut(EntryInfo) -> Result<()>) -> Result<()> {
        self.require_parts()?;
        let mut callback_err = None;
        self.with_conn(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT s.sample_key || '.' || sp.part_name, sp.content_byte_size, sp.tar_file_id \
                 FROM sample_parts AS sp JOIN samples AS s \
                 ON sp.tar_file_id = s.tar_file_id AND sp.sample_index = s.sample_index \
                 ORDER BY sp.tar_file_id, sp.sample_index, sp.content_byte_offset",
            )?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let entry = EntryInfo {
                    name: row.get(0)?,
                    size: get_u64(row, 1)?,
                    tar_file_id: get_u64(row, 2)?,
                };
                if let Err(err) = f(entry) {
                    callback_err = Some(err);
                    break;
                }
            }
            Ok(())
        })?;
        callback_err.map_or(Ok(()), Err)
    }

    /// The samples of one shard, by `sample_index`.
    pub fn samples_of_shard(&self, tar_file_id: u64) -> Result<Vec<SampleRow>> {
        self.require_samples()?;
        let tar_id = i64::try_from(tar_file_id).unwrap_or(i64::MAX);
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT tar_file_id, sample_key, sample_index, byte_offset, byte_size FROM samples \
                 WHERE tar_file_id = ?1 ORDER BY sample_index",
            )?
            .query_map([tar_id], sample_row)?
            .collect()
        })
    }

    /// The parts of one shard, by `sample_index` and then content offset (tar order).
    pub fn parts_of_shard(&self, tar_file_id: u64) -> Result<Vec<PartRow>> {
        self.require_parts()?;
        let tar_id = i64::try_from(tar_file_id).unwrap_or(i64::MAX);
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT tar_file_id, sample_index, part_name, content_byte_offset, \
                 content_byte_size FROM sample_parts WHERE tar_file_id = ?1 \
                 ORDER BY sample_index, content_byte_offset",
            )?
            .query_map([tar_id], part_row)?
            .collect()
        })
    }

    /// The row of sample `sample_index` of shard `tar_file_id` (the lowest-key row if an old
    /// index holds several), or `None` when there is none.
    pub fn sample_at(&self, tar_file_id: u64, sample_index: u64) -> Result<Option<SampleRow>> {
        self.require_samples()?;
        let tar_id = i64::try_from(tar_file_id).unwrap_or(i64::MAX);
        let index = i64::try_from(sample_index).unwrap_or(i64::MAX);
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT tar_file_id, sample_key, sample_index, byte_offset, byte_size FROM samples \
                 WHERE tar_file_id = ?1 AND sample_index = ?2 ORDER BY sample_key LIMIT 1",
            )?
            .query_row([tar_id, index], sample_row)
            .optional()
        })
    }

    /// Every sample whose key occurs more than once (possible in indexes older than 7.3), ordered
    /// by key, then `tar_file_id`, then `sample_index`. Empty for a 7.3+ index.
    pub fn duplicate_keys(&self) -> Result<Vec<SampleRow>> {
        self.require_samples()?;
        if self.version == Some(SchemaVersion::V7_3) {
            return Ok(Vec::new());
        }
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT tar_file_id, sample_key, sample_index, byte_offset, byte_size FROM samples \
                 WHERE sample_key IN \
                 (SELECT sample_key FROM samples GROUP BY sample_key HAVING COUNT(*) > 1) \
                 ORDER BY sample_key, tar_file_id, sample_index",
            )?
            .query_map([], sample_row)?
            .collect()
        })
    }

    /// The media metadata of one entry (`<key>.<part>` for a WebDataset, a relative path for a
    /// plain folder); `None` if there is none or the index has no media tables.
    pub fn media_metadata(&self, entry_key: &str) -> Result<Option<MediaMetadata>> {
        if !self.has_media_metadata {
            return Ok(None);
        }
        self.with_conn(|conn| {
            conn.prepare_cached(
                "SELECT metadata_type, metadata_json FROM media_metadata WHERE entry_key = ?1",
            )?
            .query_row([entry_key], |row| {
                Ok(MediaMetadata { metadata_type: row.get(0)?, metadata_json: row.get(1)? })
            })
            .optional()
        })
    }

    /// Fails unless the index has a `samples` table: with [`Error::NoSampleTables`] for a
    /// dataset prepared with `--no-sample-tables` (an `.info.json` next to the index), else (a
    /// media-only index of a plain folder) with [`Error::Incompatible`].
    pub fn require_samples(&self) -> Result<()> {
        if self.version.is_some() {
            return Ok(());
        }
        let meta = self.path.parent().unwrap_or(Path::new(""));
        if meta.join(crate::INFO_JSON).is_file() || meta.join(crate::INFO_YAML).is_file() {
            let dataset = meta.parent().filter(|p| !p.as_os_str().is_empty());
            let dataset = dataset.unwrap_or(Path::new("."));
            return Err(Error::NoSampleTables {
                path: self.path.clone(),
                dataset: dataset.display().to_string(),
            });
        }
        Err(Error::Incompatible {
            path: self.path.clone(),
            found: "no samples table (an index of media metadata only)".to_owned(),
            advice: "run energon prepare on the dataset to index its samples",
        })
    }

    fn require_parts(&self) -> Result<()> {
        self.require_samples()?;
        if self.has_sample_parts {
            return Ok(());
        }
        Err(Error::Incompatible {
            path: self.path.clone(),
            found: "no sample_parts table (written by energon 6.x)".to_owned(),
            advice: "read the parts from the sample's tar headers, or re-run energon prepare",
        })
    }

    /// Runs `f` on a pooled connection, opening a new one if all are in use.
    fn with_conn<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        // A poisoned lock only means another thread panicked while pushing or popping; the
        // vector of idle connections is still valid.
        let idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => connect(&self.uri).map_err(|e| Error::sqlite(&self.path, e))?,
        };
        let res = f(&conn).map_err(|e| Error::sqlite(&self.path, e));
        self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
        res
    }
}

fn connect(uri: &str) -> rusqlite::Result<Connection> {
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// Tells the energon version of the `samples` layout; `None` when there is no `samples` table.
fn detect_version(conn: &Connection) -> rusqlite::Result<Option<SchemaVersion>> {
    if !table_exists(conn, "main", "samples")? {
        return Ok(None);
    }
    let has_id: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info('samples') WHERE name = 'id')",
        [],
        |row| row.get(0),
    )?;
    if has_id {
        return Ok(Some(SchemaVersion::V6));
    }
    // A unique index whose only column is `sample_key` (the autoindex of `UNIQUE`, or any
    // equivalent unique index).
    let key_is_unique: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_index_list('samples') AS il WHERE il.\"unique\" = 1 \
         AND (SELECT COUNT(*) FROM pragma_index_info(il.name)) = 1 \
         AND (SELECT name FROM pragma_index_info(il.name)) = 'sample_key')",
        [],
        |row| row.get(0),
    )?;
    Ok(Some(if key_is_unique { SchemaVersion::V7_3 } else { SchemaVersion::V7_0 }))
}

fn sample_row(row: &Row<'_>) -> rusqlite::Result<SampleRow> {
    Ok(SampleRow {
        tar_file_id: get_u64(row, 0)?,
        sample_key: row.get(1)?,
        sample_index: get_u64(row, 2)?,
        byte_offset: get_u64(row, 3)?,
        byte_size: get_u64(row, 4)?,
    })
}

fn part_row(row: &Row<'_>) -> rusqlite::Result<PartRow> {
    Ok(PartRow {
        tar_file_id: get_u64(row, 0)?,
        sample_index: get_u64(row, 1)?,
        part_name: row.get(2)?,
        content_byte_offset: get_u64(row, 3)?,
        content_byte_size: get_u64(row, 4)?,
    })
}
