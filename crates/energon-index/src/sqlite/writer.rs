//! [`SqliteIndexWriter`]: builds a new `index.sqlite` in one bulk-load transaction.

use std::{
    fs::File,
    path::{Path, PathBuf},
};

use rusqlite::{Connection, OpenFlags, OptionalExtension, ffi, types::Value};
use rustc_hash::{FxHashMap, FxHashSet};

use super::schema::{
    INDEX_DDLS, MEDIA_FILTERS, MEDIA_FILTERS_DDL, MEDIA_METADATA, MEDIA_METADATA_DDL,
    RESET_SAMPLE_TABLES, SAMPLE_PARTS_DDL, SAMPLES_DDL, readonly_uri, table_exists, to_i64,
};
use crate::{Error, Result, shard::ShardScan};

/// Rows bound into one multi-row `INSERT` statement. Fewer statement executions cut the
/// per-row interpreter overhead; beyond a few dozen rows the gain flattens out.
const ROWS_PER_INSERT: usize = 64;

/// Connection settings for the bulk load.
///
/// - `page_size` 4096: the reference's (SQLite's default) page size; set explicitly so that a
///   compile-time default of the bundled SQLite cannot change the file layout.
/// - `locking_mode = EXCLUSIVE`: one writer, no lock round trips.
/// - `journal_mode = MEMORY`: the file is new, so the rollback journal holds almost nothing, yet a
///   failed statement (a duplicate key) still rolls back cleanly. `OFF` would gain nothing here.
/// - `synchronous = OFF`: no fsync per transaction; [`SqliteIndexWriter::finish`] syncs once.
/// - `cache_size`: 16 MiB of page cache. Rows come in shard order, so the tables and the three
///   explicit indexes are written at their ends and need few pages; ascending keys likewise.
///   Keys in random order touch the whole key index, and a larger cache did not make that
///   faster (the pages stay in the operating system's cache), only bigger. The memory of a
///   prepare thus does not grow with the dataset.
const BULK_PRAGMAS: &str = "\
    PRAGMA page_size = 4096;
    PRAGMA locking_mode = EXCLUSIVE;
    PRAGMA journal_mode = MEMORY;
    PRAGMA synchronous = OFF;
    PRAGMA cache_size = -16384;";

/// Writes a new `index.sqlite` (schema of energon 7.4) during `prepare`.
///
/// The writer works on the path it is given (prepare passes a temporary file next to the final
/// one and renames it at the end). All rows go into one transaction, committed by
/// [`finish`](Self::finish); a writer that is dropped without `finish` rolls back and the caller
/// deletes the file. The three explicit indexes exist from the start and grow with the rows,
/// cheaply when shards are added in `tar_file_id` order (as prepare does): each index then
/// only grows at its end. Memory stays at the page cache (16 MiB) whatever the number of rows;
/// the UNIQUE index on `sample_key`, which finds duplicate keys, is SQLite's own B-tree on disk.
///
/// A plain prepare creates only `samples` and `sample_parts`. The media tables are created on
/// request ([`create_media_tables`](Self::create_media_tables)) or carried over from the previous
/// index ([`copy_media_tables_from`](Self::copy_media_tables_from)).
#[derive(Debug)]
pub struct SqliteIndexWriter {
    conn: Connection,
    path: PathBuf,
    /// Whether the index gets the `samples` and `sample_parts` tables.
    sample_tables: bool,
    /// Shard names by `tar_file_id`, to name both shards of a duplicate key.
    shard_names: FxHashMap<u64, String>,
    n_samples: u64,
    n_parts: u64,
    insert_samples_multi: String,
    insert_samples_one: String,
    insert_parts_multi: String,
    insert_parts_one: String,
}

impl SqliteIndexWriter {
    /// Opens (creating it if needed) the database at `path` and sets up an empty sample index.
    ///
    /// An existing empty file (a fresh temporary file) is fine. If the file already holds a
    /// database, its `samples` and `sample_parts` tables are dropped and recreated, as the
    /// reference does; other tables are kept.
    pub fn create(path: &Path) -> Result<Self> {
        Self::create_with(path, true)
    }

    /// Like [`create`](Self::create), but without the per-sample tables (`prepare
    /// --no-sample-tables`): an existing file loses its `samples` and `sample_parts` tables and
    /// keeps the others; [`add_shard`](Self::add_shard) fails.
    pub fn create_without_sample_tables(path: &Path) -> Result<Self> {
        Self::create_with(path, false)
    }

    fn create_with(path: &Path, sample_tables: bool) -> Result<Self> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| Error::sqlite(path, e))?;
        let res = SqliteIndexWriter {
            conn,
            path: path.to_owned(),
            sample_tables,
            shard_names: FxHashMap::default(),
            n_samples: 0,
            n_parts: 0,
            insert_samples_multi: insert_sql(
                "samples (tar_file_id, sample_key, sample_index, byte_offset, byte_size)",
                ROWS_PER_INSERT,
            ),
            insert_samples_one: insert_sql(
                "samples (tar_file_id, sample_key, sample_index, byte_offset, byte_size)",
                1,
            ),
            insert_parts_multi: insert_sql(
                "sample_parts (tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size)",
                ROWS_PER_INSERT,
            ),
            insert_parts_one: insert_sql(
                "sample_parts (tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size)",
                1,
            ),
        };
        res.init().map_err(|e| Error::sqlite(path, e))?;
        Ok(res)
    }

    fn init(&self) -> rusqlite::Result<()> {
        self.conn.execute_batch(BULK_PRAGMAS)?;
        self.conn.execute_batch("BEGIN")?;
        self.conn.execute_batch(RESET_SAMPLE_TABLES)?;
        if self.sample_tables {
            self.conn.execute_batch(SAMPLES_DDL)?;
            self.conn.execute_batch(SAMPLE_PARTS_DDL)?;
            // Created before the rows: prepare adds them in (tar_file_id, sample_index,
            // offset) order, so every explicit index only grows at its end, which costs less
            // CPU and memory than sorting all rows for it after the load.
            for ddl in INDEX_DDLS {
                self.conn.execute_batch(ddl)?;
            }
        }
        Ok(())
    }

    /// The database file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the index gets the `samples` and `sample_parts` tables.
    pub fn has_sample_tables(&self) -> bool {
        self.sample_tables
    }

    /// Number of sample rows written so far.
    pub fn n_samples(&self) -> u64 {
        self.n_samples
    }

    /// Number of part rows written so far.
    pub fn n_parts(&self) -> u64 {
        self.n_parts
    }

    /// Adds the samples and parts of one shard.
    ///
    /// `tar_file_id` is the shard's position in `.info.json` `shard_counts` order; `shard_name` is
    /// its path relative to the dataset root (used in error messages). Samples get
    /// `sample_index` 0, 1, ... in scan order.
    ///
    /// A sample key that is already in the index fails with [`Error::DuplicateKey`], naming the
    /// shard that holds the earlier sample and this one; the writer must then be dropped.
    pub fn add_shard(
        &mut self,
        tar_file_id: u64,
        shard_name: &str,
        scan: &ShardScan,
    ) -> Result<()> {
        if !self.sample_tables {
            return Err(Error::Config(format!(
                "{} is written without sample tables; shard {shard_name} cannot be added",
                self.path.display()
            )));
        }
        if let Some(previous) = self.shard_names.get(&tar_file_id) {
            return Err(Error::Config(format!(
                "shard id {tar_file_id} given twice to the sqlite index ({previous} and {shard_name})"
            )));
        }
        let tar_id = to_i64(tar_file_id).map_err(|e| Error::sqlite(&self.path, e))?;
        let samples = sample_rows(shard_name, scan)?;
        self.shard_names.insert(tar_file_id, shard_name.to_owned());

        if let Err((chunk_start, err)) = self.insert_samples(tar_id, &samples) {
            return Err(self.explain_insert_error(
                err,
                tar_file_id,
                shard_name,
                &samples,
                chunk_start,
            ));
        }
        self.insert_parts(tar_id, scan).map_err(|e| Error::sqlite(&self.path, e))?;
        self.n_samples += samples.len() as u64;
        Ok(())
    }

    /// Inserts the sample rows; on failure returns the index of the first row of the statement
    /// that failed.
    fn insert_samples(
        &self,
        tar_id: i64,
        samples: &[SampleRowRef<'_>],
    ) -> Result<(), (usize, rusqlite::Error)> {
        let mut multi = self.conn.prepare_cached(&self.insert_samples_multi).map_err(|e| (0, e))?;
        let mut one = self.conn.prepare_cached(&self.insert_samples_one).map_err(|e| (0, e))?;
        let mut chunks = samples.chunks_exact(ROWS_PER_INSERT);
        let mut start = 0;
        for chunk in &mut chunks {
            bind_samples(&mut multi, tar_id, chunk).map_err(|e| (start, e))?;
            multi.raw_execute().map_err(|e| (start, e))?;
            start += chunk.len();
        }
        for row in chunks.remainder() {
            bind_samples(&mut one, tar_id, std::slice::from_ref(row)).map_err(|e| (start, e))?;
            one.raw_execute().map_err(|e| (start, e))?;
            start += 1;
        }
        Ok(())
    }

    fn insert_parts(&mut self, tar_id: i64, scan: &ShardScan) -> rusqlite::Result<()> {
        let mut parts = Vec::with_capacity(scan.samples.iter().map(|s| s.parts.len()).sum());
        for (sample_idx, sample) in scan.samples.iter().enumerate() {
            let sample_idx = to_i64(sample_idx)?;
            for part in &sample.parts {
                parts.push(PartRowRef {
                    sample_idx,
                    name: &part.name,
                    offset: to_i64(part.offset_data)?,
                    size: to_i64(part.size)?,
                });
            }
        }
        let mut multi = self.conn.prepare_cached(&self.insert_parts_multi)?;
        let mut one = self.conn.prepare_cached(&self.insert_parts_one)?;
        let mut chunks = parts.chunks_exact(ROWS_PER_INSERT);
        for chunk in &mut chunks {
            bind_parts(&mut multi, tar_id, chunk)?;
            multi.raw_execute()?;
        }
        for row in chunks.remainder() {
            bind_parts(&mut one, tar_id, std::slice::from_ref(row))?;
            one.raw_execute()?;
        }
        drop((multi, one));
        self.n_parts += parts.len() as u64;
        Ok(())
    }

    /// Turns a failed sample insert into [`Error::DuplicateKey`] when it was a UNIQUE violation.
    ///
    /// SQLite only says that some row of the failed statement clashed. The inserts are `OR FAIL`
    /// (no statement journal to copy pages into, as `ABORT` needs): the rows of the statement
    /// before the clash stay in the table, with all earlier rows of this and earlier shards. So
    /// the culprit is the first row of the statement whose key is in the table as another row,
    /// or earlier in the same statement.
    fn explain_insert_error(
        &self,
        err: rusqlite::Error,
        tar_file_id: u64,
        shard_name: &str,
        samples: &[SampleRowRef<'_>],
        chunk_start: usize,
    ) -> Error {
        if err.sqlite_extended_error_code() != Some(ffi::SQLITE_CONSTRAINT_UNIQUE) {
            return Error::sqlite(&self.path, err);
        }
        let n_in_full_chunks = samples.len() / ROWS_PER_INSERT * ROWS_PER_INSERT;
        let chunk_len = if chunk_start < n_in_full_chunks { ROWS_PER_INSERT } else { 1 };
        let chunk = &samples[chunk_start..chunk_start + chunk_len];
        let Ok(tar_id) = to_i64(tar_file_id) else { return Error::sqlite(&self.path, err) };
        let mut seen = FxHashSet::default();
        for row in chunk {
            if !seen.insert(row.key) {
                return duplicate(row.key, shard_name, shard_name);
            }
            let existing = self
                .conn
                .query_row(
                    "SELECT tar_file_id FROM samples WHERE sample_key = ?1 \
                     AND NOT (tar_file_id = ?2 AND sample_index = ?3) ORDER BY tar_file_id LIMIT 1",
                    (row.key, tar_id, row.sample_idx),
                    |r| r.get::<_, i64>(0),
                )
                .optional();
            match existing {
                Ok(Some(id)) => {
                    let first = u64::try_from(id)
                        .ok()
                        .and_then(|id| self.shard_names.get(&id))
                        .map_or_else(|| format!("shard with tar_file_id {id}"), Clone::clone);
                    return duplicate(row.key, &first, shard_name);
                }
                Ok(None) => {}
                Err(lookup_err) => return Error::sqlite(&self.path, lookup_err),
            }
        }
        Error::sqlite(&self.path, err)
    }

    /// Finishes the index: commits, and leaves an ordinary
    /// database file (rollback-journal mode, synced to disk) at [`path`](Self::path).
    pub fn finish(self) -> Result<()> {
        let path = self.path;
        let conn = self.conn;
        let finish = || -> rusqlite::Result<()> {
            conn.execute_batch("COMMIT")?;
            conn.execute_batch("PRAGMA journal_mode = DELETE")?;
            Ok(())
        };
        finish().map_err(|e| Error::sqlite(&path, e))?;
        conn.close().map_err(|(_, e)| Error::sqlite(&path, e))?;
        // `synchronous = OFF` skipped every fsync; one at the end makes the file durable before
        // prepare renames it into place.
        File::open(&path).and_then(|f| f.sync_all()).map_err(|e| Error::io("cannot sync", &path, e))
    }

    /// Creates the empty media tables (`media_metadata`, `media_filters`) if they are missing.
    ///
    /// Used by `prepare --media-metadata-by-...` and `prepare-media`; a plain prepare does not
    /// create them.
    pub fn create_media_tables(&mut self) -> Result<()> {
        let create = || -> rusqlite::Result<()> {
            for (name, ddl) in
                [(MEDIA_METADATA, MEDIA_METADATA_DDL), (MEDIA_FILTERS, MEDIA_FILTERS_DDL)]
            {
                if !table_exists(&self.conn, "main", name)? {
                    self.conn.execute_batch(ddl)?;
                }
            }
            Ok(())
        };
        create().map_err(|e| Error::sqlite(&self.path, e))
    }

    /// Adds or replaces the media metadata of one entry (`INSERT OR REPLACE`, as the reference).
    pub fn add_media_metadata(
        &mut self,
        entry_key: &str,
        metadata_type: &str,
        metadata_json: &str,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO media_metadata (entry_key, metadata_type, metadata_json) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut stmt| stmt.execute((entry_key, metadata_type, metadata_json)))
            .map(drop)
            .map_err(|e| Error::sqlite(&self.path, e))
    }

    /// Records a media filter (`INSERT OR IGNORE`: a filter used before keeps its first row).
    ///
    /// `created_at_utc` is filled in by SQLite's `CURRENT_TIMESTAMP` default, as in the reference;
    /// it is informational only and never read back to make a decision.
    pub fn add_media_filter(&mut self, strategy: &str, patterns: Option<&str>) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR IGNORE INTO media_filters (strategy, patterns) VALUES (?1, ?2)",
                (strategy, patterns),
            )
            .map(drop)
            .map_err(|e| Error::sqlite(&self.path, e))
    }

    /// Carries the media tables of a previous `index.sqlite` over into this one.
    ///
    /// A plain re-prepare leaves existing media metadata untouched; since prepare writes a fresh
    /// file, it copies them from the old one. Each of `media_metadata` and `media_filters` that
    /// exists in `old_db` is recreated with its original `CREATE` text (and explicit indexes) and
    /// all its rows; the `sqlite_sequence` entry of `media_filters` is kept, so new filters get
    /// the ids they would have had. A table that this writer already has is left as it is.
    ///
    /// Returns whether anything was copied; a missing `old_db` copies nothing.
    pub fn copy_media_tables_from(&mut self, old_db: &Path) -> Result<bool> {
        match old_db.try_exists() {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(Error::io("cannot open", old_db, e)),
        }
        let old = Connection::open_with_flags(
            readonly_uri(old_db, false),
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Error::sqlite(old_db, e))?;
        let mut copied = false;
        for table in [MEDIA_METADATA, MEDIA_FILTERS] {
            let exists_here = table_exists(&self.conn, "main", table)
                .map_err(|e| Error::sqlite(&self.path, e))?;
            if exists_here {
                continue;
            }
            copied |= self.copy_table(&old, old_db, table)?;
        }
        Ok(copied)
    }

    fn copy_table(&self, old: &Connection, old_db: &Path, table: &str) -> Result<bool> {
        let old_err = |e| Error::sqlite(old_db, e);
        let new_err = |e| Error::sqlite(&self.path, e);
        let ddl: Option<String> = old
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .optional()
            .map_err(old_err)?;
        let Some(ddl) = ddl else { return Ok(false) };
        if !ddl.starts_with("CREATE TABLE") {
            return Err(Error::Incompatible {
                path: old_db.to_owned(),
                found: format!("unexpected definition of table {table}: {ddl:?}"),
                advice: "delete the old index.sqlite or re-run prepare with media metadata flags",
            });
        }
        // `execute` (not `execute_batch`) refuses a second statement hidden after the first.
        self.conn.execute(&ddl, []).map_err(new_err)?;

        let mut select = old.prepare(&format!("SELECT * FROM \"{table}\"")).map_err(old_err)?;
        let n_columns = select.column_count();
        let placeholders = vec!["?"; n_columns].join(", ");
        let mut insert = self
            .conn
            .prepare(&format!("INSERT INTO \"{table}\" VALUES ({placeholders})"))
            .map_err(new_err)?;
        let mut rows = select.query([]).map_err(old_err)?;
        while let Some(row) = rows.next().map_err(old_err)? {
            for idx in 0..n_columns {
                let value: Value = row.get(idx).map_err(old_err)?;
                insert.raw_bind_parameter(idx + 1, value).map_err(new_err)?;
            }
            insert.raw_execute().map_err(new_err)?;
        }

        let index_ddls: Vec<String> = old
            .prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?1 AND sql IS NOT NULL ORDER BY rowid")
            .and_then(|mut stmt| stmt.query_map([table], |r| r.get(0))?.collect())
            .map_err(old_err)?;
        for index_ddl in index_ddls {
            self.conn.execute(&index_ddl, []).map_err(new_err)?;
        }

        let seq: Option<Value> = if table_exists(old, "main", "sqlite_sequence").map_err(old_err)? {
            old.query_row("SELECT seq FROM sqlite_sequence WHERE name = ?1", [table], |r| r.get(0))
                .optional()
                .map_err(old_err)?
        } else {
            None
        };
        if let Some(seq) = seq {
            self.conn
                .execute("DELETE FROM sqlite_sequence WHERE name = ?1", [table])
                .map_err(new_err)?;
            self.conn
                .execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?1, ?2)", (table, seq))
                .map_err(new_err)?;
        }
        Ok(true)
    }
}

/// One `samples` row, borrowed from a [`ShardScan`].
struct SampleRowRef<'a> {
    key: &'a str,
    sample_idx: i64,
    offset: i64,
    size: i64,
}

/// One `sample_parts` row, borrowed from a [`ShardScan`].
struct PartRowRef<'a> {
    sample_idx: i64,
    name: &'a str,
    offset: i64,
    size: i64,
}

/// The sample rows of a shard, with each sample's byte size (up to the next sample's start, or
/// the end of the last member for the last sample).
fn sample_rows<'a>(shard_name: &str, scan: &'a ShardScan) -> Result<Vec<SampleRowRef<'a>>> {
    let mut res = Vec::with_capacity(scan.samples.len());
    for (i, sample) in scan.samples.iter().enumerate() {
        let end = scan.samples.get(i + 1).map_or(scan.end_offset, |next| next.offset);
        let corrupt = |reason: &str| Error::CorruptTar {
            path: PathBuf::from(shard_name),
            offset: sample.offset,
            reason: format!("sample {:?}: {reason}", sample.key),
        };
        let size = end
            .checked_sub(sample.offset)
            .ok_or_else(|| corrupt("sample offsets are not increasing"))?;
        let offset = i64::try_from(sample.offset).map_err(|_| corrupt("offset out of range"))?;
        let size = i64::try_from(size).map_err(|_| corrupt("size out of range"))?;
        let sample_idx = i64::try_from(i).map_err(|_| corrupt("too many samples"))?;
        res.push(SampleRowRef { key: &sample.key, sample_idx, offset, size });
    }
    Ok(res)
}

fn bind_samples(
    stmt: &mut rusqlite::Statement<'_>,
    tar_id: i64,
    rows: &[SampleRowRef<'_>],
) -> rusqlite::Result<()> {
    for (i, row) in rows.iter().enumerate() {
        let base = i * 5;
        stmt.raw_bind_parameter(base + 1, tar_id)?;
        stmt.raw_bind_parameter(base + 2, row.key)?;
        stmt.raw_bind_parameter(base + 3, row.sample_idx)?;
        stmt.raw_bind_parameter(base + 4, row.offset)?;
        stmt.raw_bind_parameter(base + 5, row.size)?;
    }
    Ok(())
}

fn bind_parts(
    stmt: &mut rusqlite::Statement<'_>,
    tar_id: i64,
    rows: &[PartRowRef<'_>],
) -> rusqlite::Result<()> {
    for (i, row) in rows.iter().enumerate() {
        let base = i * 5;
        stmt.raw_bind_parameter(base + 1, tar_id)?;
        stmt.raw_bind_parameter(base + 2, row.sample_idx)?;
        stmt.raw_bind_parameter(base + 3, row.name)?;
        stmt.raw_bind_parameter(base + 4, row.offset)?;
        stmt.raw_bind_parameter(base + 5, row.size)?;
    }
    Ok(())
}

fn duplicate(key: &str, first: &str, second: &str) -> Error {
    Error::DuplicateKey { key: key.to_owned(), first: first.to_owned(), second: second.to_owned() }
}

/// `INSERT OR FAIL INTO <table_and_columns> VALUES (?, ?, ?, ?, ?), ...` with `n_rows` rows of five values.
fn insert_sql(table_and_columns: &str, n_rows: usize) -> String {
    let row = "(?, ?, ?, ?, ?)";
    let values = vec![row; n_rows].join(", ");
    format!("INSERT OR FAIL INTO {table_and_columns} VALUES {values}")
}
