//! Metadataset join indexes: `<metadataset>.cache/join_index_<sha256>.bin`.
//!
//! A join index lists, for every sample of the primary dataset of a join, where the sample with
//! the same key lives in each joined dataset. It is built by `energon prepare <metadataset.yaml>`
//! from the datasets' `index.sqlite` files ([`build_join_index`]) and read by the loader
//! ([`JoinIndex`]).
//!
//! Layout (byte-compatible with megatron-energon 7.4; little-endian):
//!
//! ```text
//! b"JIDX0001"                      magic and version (8 bytes)
//! i64 n_columns                    1 primary + the secondaries
//! rows: n_columns x (i64 shard_idx, i64 byte_offset, i64 byte_size)
//! ```
//!
//! `shard_idx` is the position of the shard in that dataset's expanded split-part list (shard
//! excludes not removed); `(-1, -1, -1)` marks a dataset without a sample for this key
//! (`nonmatch: none`). The row count is `(file size - 16) / (n_columns * 24)`.

#[cfg(test)]
#[cfg(feature = "prepare")]
mod tests;

use std::{
    fs::File,
    io::Write,
    path::{Path, PathBuf},
};

use memmap2::Mmap;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use rustc_hash::FxHashMap;

use crate::{Error, Result, fsutil::AtomicFile};

/// The magic bytes and format version at the start of every join index.
pub const MAGIC: &[u8; 8] = b"JIDX0001";

const HEADER_LEN: u64 = 16;
const ENTRY_LEN: u64 = 24;

/// Where one joined dataset's sample lives: a byte range of one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JoinEntry {
    /// Position of the shard in the dataset's expanded split-part list.
    pub shard_idx: u64,
    /// Byte offset of the sample's first tar header in the shard.
    pub byte_offset: u64,
    /// Byte length of the sample (to the next sample's first header).
    pub byte_size: u64,
}

/// What a join does with a primary sample that a joined dataset has no sample for (the
/// metadataset's `nonmatch:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nonmatch {
    /// Fail (the default, and the only mode the primary may have).
    Error,
    /// Drop the primary sample from the join.
    Skip,
    /// Keep the sample without a part from this dataset (`(-1, -1, -1)` in the index).
    None,
}

/// Writes a join index: the header first, then one row at a time; the file appears under its
/// name only on [`JoinIndexWriter::finish`] (a temporary file is renamed).
#[derive(Debug)]
pub struct JoinIndexWriter {
    file: AtomicFile,
    n_columns: usize,
    n_rows: u64,
}

impl JoinIndexWriter {
    /// Starts writing `path` with `n_columns` columns (1 primary + the secondaries).
    pub fn create(path: &Path, n_columns: usize) -> Result<Self> {
        if n_columns == 0 {
            return Err(Error::Config("a join index needs at least one column".to_owned()));
        }
        let mut file = AtomicFile::create(path)?;
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&(n_columns as i64).to_le_bytes());
        file.write_all(&header).map_err(|e| Error::io("cannot write", file.tmp_path(), e))?;
        Ok(JoinIndexWriter { file, n_columns, n_rows: 0 })
    }

    /// Appends one row: one entry per column, `None` for a secondary dataset without this
    /// sample (the primary's, column 0, must be there).
    pub fn append(&mut self, row: &[Option<JoinEntry>]) -> Result<()> {
        if row.len() != self.n_columns {
            return Err(Error::Config(format!(
                "a join index row needs {} columns, got {}",
                self.n_columns,
                row.len()
            )));
        }
        if row.first().is_some_and(Option::is_none) {
            return Err(Error::Config(format!(
                "join index {}: row {} has no primary sample (every row needs column 0)",
                self.file.tmp_path().display(),
                self.n_rows
            )));
        }
        let mut bytes = Vec::with_capacity(row.len() * ENTRY_LEN as usize);
        for entry in row {
            let values = match entry {
                Some(e) => [e.shard_idx as i64, e.byte_offset as i64, e.byte_size as i64],
                None => [-1; 3],
            };
            for v in values {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.file
            .write_all(&bytes)
            .map_err(|e| Error::io("cannot write", self.file.tmp_path(), e))?;
        self.n_rows += 1;
        Ok(())
    }

    /// Rows written so far.
    pub fn n_rows(&self) -> u64 {
        self.n_rows
    }

    /// Flushes, syncs and renames the file into place.
    pub fn finish(self) -> Result<()> {
        self.file.commit()
    }
}

/// A join index opened for reading (memory-mapped).
#[derive(Debug)]
pub struct JoinIndex {
    path: PathBuf,
    map: Option<Mmap>,
    n_columns: usize,
    n_rows: u64,
}

impl JoinIndex {
    /// Opens and checks a join index: magic, version, column count and that the rows fill the
    /// file exactly.
    ///
    /// An empty file (what the reference writes for a join without any row) opens as a join of
    /// zero rows.
    pub fn open(path: &Path) -> Result<Self> {
        // A join index in an object store is read from its copy in the local cache.
        let local =
            crate::storage::local_file(path).map_err(|e| Error::io("cannot open", path, e))?;
        let file = File::open(&local).map_err(|e| Error::io("cannot open", path, e))?;
        let len = file.metadata().map_err(|e| Error::io("cannot stat", path, e))?.len();
        if len == 0 {
            return Ok(JoinIndex { path: path.to_owned(), map: None, n_columns: 1, n_rows: 0 });
        }
        // SAFETY: the map is read-only and join indexes are written under a temporary name and
        // renamed into place, never modified; a file truncated under us could fault, as with
        // every memory-mapped index of this crate.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io("cannot map", path, e))?;
        let corrupt = |offset: u64, reason: String| Error::CorruptIndex {
            path: path.to_owned(),
            offset,
            reason,
        };
        if map.len() < HEADER_LEN as usize {
            return Err(corrupt(0, format!("{len} bytes is shorter than the 16-byte header")));
        }
        if &map[..4] != b"JIDX" {
            return Err(corrupt(0, "bad magic (not a join index)".to_owned()));
        }
        if &map[..8] != MAGIC {
            return Err(Error::Incompatible {
                path: path.to_owned(),
                found: format!("join index version {:?}", String::from_utf8_lossy(&map[4..8])),
                advice: "re-run `energon prepare` on the metadataset",
            });
        }
        let n_columns = read_i64(&map, 8);
        let n_columns = usize::try_from(n_columns)
            .ok()
            .filter(|&n| (1..=1 << 20).contains(&n))
            .ok_or_else(|| corrupt(8, format!("invalid column count {n_columns}")))?;
        let row_len = n_columns as u64 * ENTRY_LEN;
        let body = len - HEADER_LEN;
        if !body.is_multiple_of(row_len) {
            return Err(corrupt(
                HEADER_LEN + body / row_len * row_len,
                format!("{body} bytes of rows is not a multiple of the {row_len}-byte row"),
            ));
        }
        Ok(JoinIndex { path: path.to_owned(), map: Some(map), n_columns, n_rows: body / row_len })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Columns per row (1 primary + the secondaries).
    pub fn n_columns(&self) -> usize {
        self.n_columns
    }

    /// Number of rows (joined samples).
    pub fn len(&self) -> u64 {
        self.n_rows
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.n_rows == 0
    }

    /// Entry `column` of row `row`: `Ok(None)` for a secondary dataset without this sample
    /// (`(-1, -1, -1)`); an error for a row or column out of range, a negative value other
    /// than that marker, or that marker in the primary column (0), which every row must have.
    pub fn entry(&self, row: u64, column: usize) -> Result<Option<JoinEntry>> {
        let (Some(map), true, true) = (&self.map, row < self.n_rows, column < self.n_columns)
        else {
            return Err(Error::Config(format!(
                "join index {}: no entry ({row}, {column}) in {} rows of {} columns",
                self.path.display(),
                self.n_rows,
                self.n_columns
            )));
        };
        let offset = HEADER_LEN + (row * self.n_columns as u64 + column as u64) * ENTRY_LEN;
        let at = offset as usize;
        let values = [read_i64(map, at), read_i64(map, at + 8), read_i64(map, at + 16)];
        if values == [-1; 3] {
            if column == 0 {
                return Err(Error::CorruptIndex {
                    path: self.path.clone(),
                    offset,
                    reason: format!(
                        "row {row} has the missing marker (-1, -1, -1) in the primary column; \
                         every row needs its primary sample (re-run `energon prepare`)"
                    ),
                });
            }
            return Ok(None);
        }
        match values.map(u64::try_from) {
            [Ok(shard_idx), Ok(byte_offset), Ok(byte_size)] => {
                Ok(Some(JoinEntry { shard_idx, byte_offset, byte_size }))
            }
            _ => Err(Error::CorruptIndex {
                path: self.path.clone(),
                offset,
                reason: format!("negative entry {values:?}"),
            }),
        }
    }

    /// All entries of row `row`.
    pub fn row(&self, row: u64) -> Result<Vec<Option<JoinEntry>>> {
        (0..self.n_columns).map(|column| self.entry(row, column)).collect()
    }
}

fn read_i64(bytes: &[u8], at: usize) -> i64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(&bytes[at..at + 8]);
    i64::from_le_bytes(buf)
}

/// One dataset of a join, as [`build_join_index`] needs it.
#[derive(Debug, Clone)]
pub struct JoinInput {
    /// The dataset's `.nv-meta/index.sqlite`.
    pub db_path: PathBuf,
    /// The dataset's shards in `.info.json` order (position = `tar_file_id`).
    pub info_shards: Vec<String>,
    /// The split part's expanded shard list, excluded shards included (position = the
    /// `shard_idx` written to the index).
    pub split_part_files: Vec<String>,
    /// Every expanded `exclude` entry of the split file: shard names and `<shard>/<key>`.
    pub excludes: Vec<String>,
    /// What to do with a primary sample this dataset lacks (must be [`Nonmatch::Error`] for the
    /// primary, the first input).
    pub nonmatch: Nonmatch,
}

impl JoinInput {
    /// The input for split part `split_part` of the prepared dataset at `root`, reading its
    /// `.info.json` and split file (`split_config`, `None` for `split.yaml`).
    ///
    /// Also returns the sample excludes as the reference hashes them into the join index name:
    /// every expanded exclude containing `/`, sorted.
    pub fn from_dataset(
        root: &Path,
        split_part: &str,
        split_config: Option<&str>,
        nonmatch: Nonmatch,
    ) -> Result<(Self, Vec<String>)> {
        let info = crate::info::read_dataset_info(root)?;
        let (split_path, split) = crate::split::read_dataset_split(root, split_config)?;
        let resolved = split.resolve(&split_path, split_part, &info.shard_counts)?;
        let mut excludes = Vec::new();
        for pattern in &split.exclude {
            excludes.extend(crate::split::brace_expand(pattern)?);
        }
        let mut hashed: Vec<String> =
            excludes.iter().filter(|e| e.contains('/')).cloned().collect();
        hashed.sort();
        hashed.dedup();
        let input = JoinInput {
            db_path: root.join(crate::NV_META).join(crate::INDEX_SQLITE),
            info_shards: info.shard_names().map(str::to_owned).collect(),
            split_part_files: resolved.split_part_files,
            excludes,
            nonmatch,
        };
        Ok((input, hashed))
    }
}

/// What [`build_join_index`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinSummary {
    /// Rows written.
    pub n_rows: u64,
    /// Samples of the primary's split part (after excludes).
    pub n_primary: u64,
    /// Per input, how many rows have no sample of it (`nonmatch: none`).
    pub n_missing: Vec<u64>,
}

/// Joins the `samples` tables of the datasets by `sample_key` and writes the join index `out`.
///
/// As the reference does it: each database is filtered by its excludes (whole shards and
/// `<shard>.tar/<key>` samples); duplicate keys are an error; the primary (first input) is
/// restricted to the shards of its split part and ordered by their position there, then by the
/// sample's position in its shard; each secondary is joined on the key, dropping the row for
/// `nonmatch: skip`, writing `(-1, -1, -1)` for `none` and failing for `error`. Every entry's
/// `shard_idx` is the shard's position in that dataset's `split_part_files`.
pub fn build_join_index(inputs: &[JoinInput], out: &Path) -> Result<JoinSummary> {
    let Some(primary) = inputs.first() else {
        return Err(Error::Config("a join needs at least one dataset".to_owned()));
    };
    let fail = |reason: String| Error::Join { path: primary.db_path.clone(), reason };
    if primary.nonmatch != Nonmatch::Error {
        return Err(fail("the primary dataset of a join must have nonmatch: error".to_owned()));
    }
    // The databases of datasets in an object store are read from their copies in the local cache.
    let mut local_dbs = Vec::with_capacity(inputs.len());
    for input in inputs {
        // A dataset prepared with `--no-sample-tables` says how to add them.
        crate::sqlite::SqliteIndex::open(&input.db_path)?.require_samples()?;
        local_dbs.push(
            crate::storage::local_file(&input.db_path)
                .map_err(|e| Error::io("cannot open", &input.db_path, e))?,
        );
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(readonly_uri(&local_dbs[0]), flags)
        .map_err(|e| Error::sqlite(&primary.db_path, e))?;
    let aliases: Vec<String> = (0..inputs.len())
        .map(|i| if i == 0 { "main".to_owned() } else { format!("db{i}") })
        .collect();
    let sql_err = |input: &JoinInput| {
        let path = input.db_path.clone();
        move |e: rusqlite::Error| Error::sqlite(&path, e)
    };
    for ((input, alias), local) in inputs.iter().zip(&aliases).zip(&local_dbs).skip(1) {
        conn.execute(&format!("ATTACH DATABASE ?1 AS {alias}"), [readonly_uri(local)])
            .map_err(sql_err(input))?;
    }
    // Maps from tar_file_id to the position in the split part, per input (the last position of
    // a shard listed twice, as the reference's dict keeps it).
    let mut positions = Vec::with_capacity(inputs.len());
    for (input, alias) in inputs.iter().zip(&aliases) {
        let ids = shard_ids(input);
        filter_view(&conn, alias, input, &ids).map_err(|e| match e {
            FilterError::Sql(e) => Error::sqlite(&input.db_path, e),
            FilterError::Exclude(reason) => Error::Join { path: input.db_path.clone(), reason },
        })?;
        check_duplicates(&conn, alias, input)?;
        let mut position = FxHashMap::default();
        for (i, name) in input.split_part_files.iter().enumerate() {
            let Some(&id) = ids.get(name.as_str()) else {
                return Err(Error::Join {
                    path: input.db_path.clone(),
                    reason: format!("split part names shard {name:?}, which is not in .info.json"),
                });
            };
            position.insert(id, i as u64);
        }
        positions.push(position);
    }
    conn.execute_batch(
        "DROP TABLE IF EXISTS temp.primary_order;
         CREATE TEMP TABLE primary_order (tar_file_id INTEGER PRIMARY KEY, split_index INTEGER);",
    )
    .map_err(sql_err(primary))?;
    {
        let mut insert = conn
            .prepare("INSERT INTO temp.primary_order (tar_file_id, split_index) VALUES (?1, ?2)")
            .map_err(sql_err(primary))?;
        let ids = shard_ids(primary);
        for (i, name) in primary.split_part_files.iter().enumerate() {
            // Checked above: every split part shard is in the info.
            let id = ids.get(name.as_str()).copied().unwrap_or(u64::MAX);
            insert.execute([id as i64, i as i64]).map_err(|e| {
                fail(format!("shard {name:?} is listed twice in the split part ({e})"))
            })?;
        }
    }
    let mut columns = vec![
        "main_filtered.sample_key".to_owned(),
        "main_filtered.tar_file_id".to_owned(),
        "main_filtered.byte_offset".to_owned(),
        "main_filtered.byte_size".to_owned(),
    ];
    let mut joins = String::new();
    for (input, alias) in inputs.iter().zip(&aliases).skip(1) {
        for column in ["tar_file_id", "byte_offset", "byte_size"] {
            columns.push(format!("{alias}_filtered.{column}"));
        }
        let kind = if input.nonmatch == Nonmatch::Skip { "INNER JOIN" } else { "LEFT JOIN" };
        joins.push_str(&format!(
            " {kind} {alias}_filtered ON main_filtered.sample_key = {alias}_filtered.sample_key"
        ));
    }
    // COMPAT(energon 7.4.1): join_dataset_loader.py:join_multiple_indices orders by the split
    // position only; SQLite returns the shard's rows in insertion (= tar) order, made explicit
    // here with the sample index.
    let sql = format!(
        "SELECT {} FROM main_filtered{joins} INNER JOIN temp.primary_order o ON \
         main_filtered.tar_file_id = o.tar_file_id ORDER BY o.split_index, \
         main_filtered.sample_index",
        columns.join(", ")
    );
    let mut writer = JoinIndexWriter::create(out, inputs.len())?;
    let mut n_missing = vec![0u64; inputs.len()];
    {
        let mut stmt = conn.prepare(&sql).map_err(sql_err(primary))?;
        let mut rows = stmt.query([]).map_err(sql_err(primary))?;
        let mut entries = Vec::with_capacity(inputs.len());
        while let Some(row) = rows.next().map_err(sql_err(primary))? {
            let key: String = row.get(0).map_err(sql_err(primary))?;
            entries.clear();
            for (i, input) in inputs.iter().enumerate() {
                let get = |j: usize| row.get::<_, Option<i64>>(1 + 3 * i + j);
                let (tar_file_id, offset, size) = (
                    get(0).map_err(sql_err(input))?,
                    get(1).map_err(sql_err(input))?,
                    get(2).map_err(sql_err(input))?,
                );
                let Some(tar_file_id) = tar_file_id else {
                    match input.nonmatch {
                        Nonmatch::None => {
                            n_missing[i] += 1;
                            entries.push(None);
                            continue;
                        }
                        Nonmatch::Error | Nonmatch::Skip => {
                            return Err(Error::Join {
                                path: input.db_path.clone(),
                                reason: format!(
                                    "sample key {key:?} of the primary dataset is missing here \
                                     (set nonmatch: skip or none to allow that)"
                                ),
                            });
                        }
                    }
                };
                let Some(&shard_idx) =
                    u64::try_from(tar_file_id).ok().and_then(|id| positions[i].get(&id))
                else {
                    return Err(Error::Join {
                        path: input.db_path.clone(),
                        reason: format!(
                            "sample key {key:?} lies in shard {tar_file_id} (tar_file_id), which \
                             is not in this dataset's split part"
                        ),
                    });
                };
                let (Ok(byte_offset), Ok(byte_size)) =
                    (u64::try_from(offset.unwrap_or(-1)), u64::try_from(size.unwrap_or(-1)))
                else {
                    return Err(Error::Join {
                        path: input.db_path.clone(),
                        reason: format!("sample key {key:?} has no byte range in index.sqlite"),
                    });
                };
                entries.push(Some(JoinEntry { shard_idx, byte_offset, byte_size }));
            }
            writer.append(&entries)?;
        }
    }
    let n_primary: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM main_filtered INNER JOIN temp.primary_order o ON \
             main_filtered.tar_file_id = o.tar_file_id",
            [],
            |row| row.get(0),
        )
        .map_err(sql_err(primary))?;
    let n_rows = writer.n_rows();
    let any_skip = inputs.iter().any(|i| i.nonmatch == Nonmatch::Skip);
    if !any_skip && n_rows != n_primary as u64 {
        return Err(fail(format!(
            "the join has {n_rows} rows but the primary split part has {n_primary} samples"
        )));
    }
    writer.finish()?;
    Ok(JoinSummary { n_rows, n_primary: n_primary as u64, n_missing })
}

/// `tar_file_id` by shard name.
fn shard_ids(input: &JoinInput) -> FxHashMap<&str, u64> {
    input.info_shards.iter().enumerate().map(|(i, name)| (name.as_str(), i as u64)).collect()
}

enum FilterError {
    Sql(rusqlite::Error),
    Exclude(String),
}

impl From<rusqlite::Error> for FilterError {
    fn from(e: rusqlite::Error) -> Self {
        FilterError::Sql(e)
    }
}

/// Creates the view `<alias>_filtered`: the `samples` of `alias` without excluded shards and
/// samples (the reference's `filter_samples_with_excludes`).
fn filter_view(
    conn: &Connection,
    alias: &str,
    input: &JoinInput,
    ids: &FxHashMap<&str, u64>,
) -> std::result::Result<(), FilterError> {
    let mut shards = Vec::new();
    let mut samples = Vec::new();
    for exclude in &input.excludes {
        if let Some(&id) = ids.get(exclude.as_str()) {
            shards.push(id);
        } else if let Some((tar, key)) = exclude.split_once(".tar/") {
            let shard = format!("{tar}.tar");
            let Some(&id) = ids.get(shard.as_str()) else {
                return Err(FilterError::Exclude(format!(
                    "exclude {exclude:?} names shard {shard:?}, which is not in .info.json"
                )));
            };
            samples.push((id, key.to_owned()));
        } else if exclude.ends_with(".tar") || !exclude.contains('/') {
            // A shard of another dataset layout, or a name the reference ignores here.
        } else {
            return Err(FilterError::Exclude(format!(
                "cannot split exclude {exclude:?} into a shard and a sample key"
            )));
        }
    }
    let view = format!("{alias}_filtered");
    let shard_table = format!("temp.shard_excludes_{alias}");
    let sample_table = format!("temp.sample_excludes_{alias}");
    conn.execute_batch(&format!(
        "DROP VIEW IF EXISTS temp.{view};
         DROP TABLE IF EXISTS {shard_table};
         DROP TABLE IF EXISTS {sample_table};
         CREATE TEMP TABLE shard_excludes_{alias} (tar_file_id INTEGER PRIMARY KEY);
         CREATE TEMP TABLE sample_excludes_{alias} (tar_file_id INTEGER, sample_key TEXT,
             PRIMARY KEY (tar_file_id, sample_key));"
    ))?;
    let mut insert = conn.prepare(&format!("INSERT OR IGNORE INTO {shard_table} VALUES (?1)"))?;
    for id in shards {
        insert.execute([id as i64])?;
    }
    let mut insert =
        conn.prepare(&format!("INSERT OR IGNORE INTO {sample_table} VALUES (?1, ?2)"))?;
    for (id, key) in &samples {
        insert.execute(rusqlite::params![*id as i64, key])?;
    }
    conn.execute_batch(&format!(
        "CREATE TEMP VIEW {view} AS
         SELECT s.sample_key, s.tar_file_id, s.sample_index, s.byte_offset, s.byte_size
         FROM {alias}.samples s
         WHERE s.tar_file_id NOT IN (SELECT tar_file_id FROM {shard_table})
           AND NOT EXISTS (SELECT 1 FROM {sample_table} e
                           WHERE e.tar_file_id = s.tar_file_id AND e.sample_key = s.sample_key);"
    ))?;
    Ok(())
}

fn check_duplicates(conn: &Connection, alias: &str, input: &JoinInput) -> Result<()> {
    let duplicate: Option<(String, i64)> = conn
        .query_row(
            &format!(
                "SELECT sample_key, COUNT(*) AS c FROM {alias}_filtered GROUP BY sample_key \
                 HAVING c > 1 LIMIT 1"
            ),
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(|e| Error::sqlite(&input.db_path, e))?;
    match duplicate {
        None => Ok(()),
        Some((key, n)) => Err(Error::Join {
            path: input.db_path.clone(),
            reason: format!(
                "sample key {key:?} occurs {n} times; keys must be unique to join (re-prepare with \
                 --fix-duplicates)"
            ),
        }),
    }
}

/// `file:<path>?mode=ro&immutable=1`, percent-encoding everything but unreserved characters and
/// `/` (an absolute path gets an empty authority, `file:///abs`).
fn readonly_uri(path: &Path) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut res = String::with_capacity(bytes.len() + 32);
    res.push_str(if bytes.first() == Some(&b'/') { "file://" } else { "file:" });
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            res.push(char::from(b));
        } else {
            res.push('%');
            res.push(char::from(HEX[usize::from(b >> 4)]));
            res.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
    res.push_str("?mode=ro&immutable=1");
    res
}
