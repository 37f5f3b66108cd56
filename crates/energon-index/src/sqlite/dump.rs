//! [`dump_canonical`]: a deterministic text form of a whole SQLite database, for golden tests.

use std::{fmt::Write as _, path::Path};

use rusqlite::{Connection, OpenFlags, types::ValueRef};

use super::schema::readonly_uri;
use crate::{Error, Result};

/// Row order per known table; every other column follows as a tie-break, and unknown tables are
/// ordered by all their columns.
const CANONICAL_ORDER: [(&str, &[&str]); 5] = [
    ("samples", &["tar_file_id", "sample_index"]),
    ("sample_parts", &["tar_file_id", "sample_index", "content_byte_offset"]),
    ("media_metadata", &["entry_key"]),
    ("media_filters", &["strategy", "patterns"]),
    ("sqlite_sequence", &["name"]),
];

/// Dumps a database as text: the schema (every `sqlite_master` entry sorted by name, with its
/// `CREATE` text verbatim), then every table's rows in a canonical order.
///
/// Samples are ordered by `tar_file_id, sample_index`, parts by `tar_file_id, sample_index,
/// content_byte_offset`, media metadata by `entry_key`, media filters by `strategy, patterns`,
/// other tables by all columns. Two databases with the same schema and the same rows give the
/// same dump regardless of insertion order or page layout. `media_filters.created_at_utc` (a
/// wall-clock stamp) is shown as `<volatile>`; text is shown Rust-escaped and quoted.
pub fn dump_canonical(path: &Path) -> Result<String> {
    std::fs::metadata(path).map_err(|e| Error::io("cannot open", path, e))?;
    let conn = Connection::open_with_flags(
        readonly_uri(path, true),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::sqlite(path, e))?;
    dump(&conn).map_err(|e| Error::sqlite(path, e))
}

fn dump(conn: &Connection) -> rusqlite::Result<String> {
    let mut res = String::from("schema:\n");
    let mut tables = Vec::new();
    {
        let mut stmt = conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name, type")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (kind, name, tbl_name): (String, String, String) =
                (row.get(0)?, row.get(1)?, row.get(2)?);
            let sql: Option<String> = row.get(3)?;
            let sql = sql.map_or_else(|| "NULL".to_owned(), |sql| format!("{sql:?}"));
            // Writing to a String cannot fail.
            let _ = writeln!(res, "  {kind} {name} on {tbl_name}: {sql}");
            if kind == "table" {
                tables.push(name);
            }
        }
    }
    for table in &tables {
        dump_table(conn, table, &mut res)?;
    }
    Ok(res)
}

fn dump_table(conn: &Connection, table: &str, res: &mut String) -> rusqlite::Result<()> {
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?
        .query_map([table], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let preferred =
        CANONICAL_ORDER.iter().find(|(name, _)| *name == table).map_or(&[][..], |(_, cols)| *cols);
    let mut order: Vec<&str> =
        preferred.iter().copied().filter(|c| columns.iter().any(|col| col == c)).collect();
    for col in &columns {
        if !order.contains(&col.as_str()) {
            order.push(col);
        }
    }
    let order_sql: Vec<String> = order.iter().map(|c| quote_ident(c)).collect();
    let volatile = columns.iter().position(|c| table == "media_filters" && c == "created_at_utc");

    let count: i64 =
        conn.query_row(&format!("SELECT COUNT(*) FROM {}", quote_ident(table)), [], |r| r.get(0))?;
    let _ = writeln!(res, "table {table}: {count} rows ORDER BY {}", order.join(", "));
    let _ = writeln!(res, "  ({})", columns.join(", "));
    let sql = format!("SELECT * FROM {} ORDER BY {}", quote_ident(table), order_sql.join(", "));
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        res.push_str("  (");
        for idx in 0..columns.len() {
            if idx > 0 {
                res.push_str(", ");
            }
            if Some(idx) == volatile {
                res.push_str("<volatile>");
                continue;
            }
            match row.get_ref(idx)? {
                ValueRef::Null => res.push_str("NULL"),
                ValueRef::Integer(v) => {
                    let _ = write!(res, "{v}");
                }
                ValueRef::Real(v) => {
                    let _ = write!(res, "{v:?}");
                }
                ValueRef::Text(bytes) => {
                    let _ = write!(res, "{:?}", String::from_utf8_lossy(bytes));
                }
                ValueRef::Blob(bytes) => {
                    res.push_str("x'");
                    for b in bytes {
                        let _ = write!(res, "{b:02x}");
                    }
                    res.push('\'');
                }
            }
        }
        res.push_str(")\n");
    }
    Ok(())
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
