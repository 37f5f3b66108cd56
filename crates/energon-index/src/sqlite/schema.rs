//! The exact schema text of `index.sqlite` and small helpers shared by the writer and reader.
//!
//! SQLite keeps the text of every `CREATE` statement in `sqlite_master.sql`, starting at the
//! object name (an `IF NOT EXISTS` is dropped) and ending at the closing parenthesis. The constants
//! below are that stored text, byte for byte as energon 7.4 leaves it, so that a schema comparison
//! of our file against the reference's passes.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row};

/// `samples`: one row per sample (7.3+: `sample_key` is `UNIQUE`, which creates
/// `sqlite_autoindex_samples_1`).
pub(super) const SAMPLES_DDL: &str = concat!(
    "CREATE TABLE samples (\n",
    "                    tar_file_id INTEGER NOT NULL,\n",
    "                    sample_key TEXT NOT NULL UNIQUE,\n",
    "                    sample_index INTEGER NOT NULL,\n",
    "                    byte_offset INTEGER,\n",
    "                    byte_size INTEGER\n",
    "                )",
);

/// `sample_parts`: one row per matched tar member.
pub(super) const SAMPLE_PARTS_DDL: &str = concat!(
    "CREATE TABLE sample_parts (\n",
    "                    tar_file_id INTEGER,\n",
    "                    sample_index INTEGER,\n",
    "                    part_name TEXT,\n",
    "                    content_byte_offset INTEGER,\n",
    "                    content_byte_size INTEGER\n",
    "                )",
);

/// The three explicit indexes, created after the bulk load, in the reference's order.
pub(super) const INDEX_DDLS: [&str; 3] = [
    "CREATE INDEX idx_samples_by_tar_and_idx ON samples(tar_file_id, sample_index)",
    "CREATE INDEX idx_sample_parts_seq ON sample_parts(tar_file_id, sample_index, content_byte_offset)",
    "CREATE INDEX idx_sample_parts_full ON sample_parts(tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size)",
];

/// Statements that clear a previous sample index from a database file, as the reference does on
/// every prepare (including the 7.3 index `idx_samples_sample_key` that 7.4 no longer creates).
pub(super) const RESET_SAMPLE_TABLES: &str = "\
    DROP INDEX IF EXISTS idx_samples_sample_key;
    DROP INDEX IF EXISTS idx_samples_by_tar_and_idx;
    DROP TABLE IF EXISTS samples;
    DROP INDEX IF EXISTS idx_sample_parts_seq;
    DROP INDEX IF EXISTS idx_sample_parts_full;
    DROP TABLE IF EXISTS sample_parts;";

/// Name of the media metadata table.
pub(crate) const MEDIA_METADATA: &str = "media_metadata";
/// Name of the media filter table.
pub(crate) const MEDIA_FILTERS: &str = "media_filters";

/// `media_metadata`: one row per media entry (`<key>.<part>` or a relative file path).
pub(crate) const MEDIA_METADATA_DDL: &str = concat!(
    "CREATE TABLE media_metadata (\n",
    "                    entry_key TEXT PRIMARY KEY,\n",
    "                    metadata_type TEXT NOT NULL,\n",
    "                    metadata_json TEXT NOT NULL\n",
    "                )",
);

/// `media_filters`: one row per media filter ever used on the dataset. `AUTOINCREMENT` makes
/// SQLite add its `sqlite_sequence` table.
pub(crate) const MEDIA_FILTERS_DDL: &str = concat!(
    "CREATE TABLE media_filters (\n",
    "                    filter_id INTEGER PRIMARY KEY AUTOINCREMENT,\n",
    "                    strategy TEXT NOT NULL,\n",
    "                    patterns TEXT,\n",
    "                    created_at_utc TEXT DEFAULT CURRENT_TIMESTAMP,\n",
    "                    UNIQUE(strategy, patterns)\n",
    "                )",
);

/// Builds the SQLite URI that opens `path` read-only; `immutable` also tells SQLite that nobody
/// changes the file (no locking, no change detection), as the reference's readers do.
///
/// Every byte outside the URI "unreserved" set and `/` is percent-encoded, so paths with `?`, `#`,
/// `%` or spaces open the right file.
pub(super) fn readonly_uri(path: &Path, immutable: bool) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut res = String::with_capacity(bytes.len() + 32);
    // An absolute path gets an empty authority (`file:///abs`), so that a path starting with `//`
    // is not taken for a host name.
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
    res.push_str(if immutable { "?mode=ro&immutable=1" } else { "?mode=ro" });
    res
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Whether the database has a table (not a view or index) of this name.
pub(crate) fn table_exists(conn: &Connection, schema: &str, name: &str) -> rusqlite::Result<bool> {
    let sql = format!("SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?1");
    Ok(conn.query_row(&sql, [name], |_| Ok(())).optional()?.is_some())
}

/// Converts a non-negative count or offset to SQLite's integer type.
pub(super) fn to_i64<T>(value: T) -> rusqlite::Result<i64>
where
    T: TryInto<i64, Error = std::num::TryFromIntError>,
{
    value.try_into().map_err(|err| rusqlite::Error::ToSqlConversionFailure(Box::new(err)))
}

/// Reads column `idx` as a non-negative `u64`; a negative value is an error, as is NULL.
pub(super) fn get_u64(row: &Row<'_>, idx: usize) -> rusqlite::Result<u64> {
    let value: i64 = row.get(idx)?;
    u64::try_from(value).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(idx, value))
}
