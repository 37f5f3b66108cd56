//! Cheap checks that a shard still matches its index files: its size against the `.tar.idx`
//! end offset, and the keys in its tar headers against `index.sqlite`.
//!
//! [`check_shard`] runs once per shard when the reader first uses it (the first and the last
//! sample); [`check_rows`] compares every row `index.sqlite` holds for a shard (what
//! `energon lint` runs).

use std::path::Path;

use energon_index::{
    sqlite::{SampleRow, SqliteIndex},
    tar_scan::{PaxGlobals, is_skipped, members, split_key_part},
};

use crate::{
    Error,
    error::SampleAt,
    mapped::{OffsetIndex, ShardData},
};

/// What the checks need to know about a shard to name it in errors.
pub(crate) struct ShardRef<'a> {
    /// The dataset root.
    pub dataset: &'a Path,
    /// The shard name relative to the root.
    pub name: &'a str,
    /// The shard's `.tar.idx`.
    pub idx_path: &'a Path,
    /// The shard's position in `.info.json` (its `tar_file_id`).
    pub tar_file_id: u64,
    /// The PAX global values before its first sample (see [`leading_globals`]).
    pub globals: &'a PaxGlobals,
}

/// How much of a shard's start [`leading_globals`] looks at.
const LEADING_BYTES: u64 = 64 << 10;

/// The PAX global values (`path`, `size`) set by headers before the shard's first sample, which
/// starts at byte offset `first`. Python's `tarfile` reads the headers up to the first member
/// when it opens a shard and applies their global values to every member it reads later,
/// wherever it seeks to (so the reference reads a sample range with them, and names the members
/// as its prepare did); a walk of a sample range alone does not see them. Most shards have no
/// bytes before their first sample (nothing is read then); at most the first 64 KiB are.
pub(crate) fn leading_globals(data: &ShardData, first: u64) -> std::io::Result<PaxGlobals> {
    let first = first.min(data.len()).min(LEADING_BYTES);
    if first == 0 {
        return Ok(PaxGlobals::default());
    }
    let head = data.range(0, first)?;
    let mut walk = members(&head, 0);
    // Up to the first member, as Python's `tarfile` reads when it opens the shard (a member cut
    // off by the window ends the walk; the globals before it still count).
    let _ = walk.next();
    Ok(walk.globals())
}

impl ShardRef<'_> {
    /// A [`Error::ShardChanged`] about this shard.
    pub(crate) fn changed(
        &self,
        index: &Path,
        key: Option<&str>,
        sample: Option<u64>,
        offset: u64,
        reason: String,
    ) -> Error {
        Error::ShardChanged {
            at: Box::new(SampleAt {
                dataset: self.dataset.to_path_buf(),
                shard: self.name.to_owned(),
                key: key.map(str::to_owned),
                index: sample,
                offset,
            }),
            index: index.to_path_buf(),
            reason,
        }
    }

    fn inconsistent(&self, db: &SqliteIndex, reason: String) -> Error {
        Error::Index(energon_index::Error::Inconsistent {
            first: db.path().to_path_buf(),
            second: self.idx_path.to_path_buf(),
            reason: format!("shard {}: {reason}", self.name),
        })
    }
}

/// The key of the first sample member in bytes `[start, end)` of the shard, or where and why
/// there is none.
fn key_at(
    data: &ShardData,
    start: u64,
    end: u64,
    globals: &PaxGlobals,
) -> Result<String, (u64, String)> {
    if start > end || end > data.len() {
        return Err((start, format!("bytes [{start}, {end}) are not in the shard")));
    }
    let range = data
        .range(start, end)
        .map_err(|e| (start, format!("cannot read bytes [{start}, {end}): {e}")))?;
    for member in members(&range, start).in_range().with_globals(globals) {
        let member = member.map_err(|e| {
            (
                e.offset,
                format!(
                    "the tar member at byte offset {} does not fit the index: {}",
                    e.offset, e.reason
                ),
            )
        })?;
        if !member.is_regular() || is_skipped(&member.name) {
            continue;
        }
        if let Some((key, _)) = split_key_part(&member.name) {
            return Ok(key.to_owned());
        }
    }
    Err((start, format!("no sample member in bytes [{start}, {end})")))
}

/// The size check: the shard must hold every byte the `.tar.idx` points into.
pub(crate) fn check_size(
    shard: &ShardRef<'_>,
    idx: &OffsetIndex,
    shard_len: u64,
) -> Result<(), Error> {
    let end = idx.get(idx.n_entries().saturating_sub(1)).unwrap_or(0);
    if end > shard_len {
        return Err(shard.changed(
            shard.idx_path,
            None,
            None,
            end,
            format!(
                "the shard is {shard_len} bytes but its .tar.idx ends at byte offset {end} \
                 (truncated or replaced)"
            ),
        ));
    }
    Ok(())
}

/// The first-use check of a shard: its size, and the keys of its first and last samples against
/// `index.sqlite` (`db`, when the dataset has a readable one).
pub(crate) fn check_shard(
    shard: &ShardRef<'_>,
    idx: &OffsetIndex,
    data: &ShardData,
    db: Option<&SqliteIndex>,
) -> Result<(), Error> {
    check_size(shard, idx, data.len())?;
    let Some(db) = db else {
        return Ok(());
    };
    let n = idx.n_entries().saturating_sub(1);
    let mut probes = vec![0, n.saturating_sub(1)];
    probes.dedup();
    for local in probes.into_iter().filter(|&i| i < n) {
        let row = match db.sample_at(shard.tar_file_id, local) {
            Ok(Some(row)) => row,
            Ok(None) => {
                return Err(shard.inconsistent(
                    db,
                    format!(
                        "the .tar.idx has {n} samples, index.sqlite has no row for sample {local}"
                    ),
                ));
            }
            Err(err) => {
                // The sequential reader does not need the database: an unreadable one only
                // skips this check.
                tracing::debug!("not checking keys against {}: {err}", db.path().display());
                return Ok(());
            }
        };
        check_row(shard, idx, data, db, local, &row)?;
    }
    Ok(())
}

/// Compares one `index.sqlite` row (sample `local` of the shard) with the `.tar.idx` and the
/// shard's header at that offset.
pub(crate) fn check_row(
    shard: &ShardRef<'_>,
    idx: &OffsetIndex,
    data: &ShardData,
    db: &SqliteIndex,
    local: u64,
    row: &SampleRow,
) -> Result<(), Error> {
    let (Some(start), Some(end)) = (idx.get(local), idx.get(local + 1)) else {
        return Err(shard.inconsistent(
            db,
            format!(
                "index.sqlite has sample {local} (key {:?}), the .tar.idx has only {} samples",
                row.sample_key,
                idx.n_entries().saturating_sub(1)
            ),
        ));
    };
    if row.byte_offset != start || row.byte_offset.checked_add(row.byte_size) != Some(end) {
        return Err(shard.inconsistent(
            db,
            format!(
                "sample {local} (key {:?}) is at bytes [{}, {}) in index.sqlite but [{start}, \
                 {end}) in the .tar.idx",
                row.sample_key,
                row.byte_offset,
                row.byte_offset.saturating_add(row.byte_size)
            ),
        ));
    }
    match key_at(data, start, end, shard.globals) {
        Ok(found) if found == row.sample_key => Ok(()),
        Ok(found) => Err(shard.changed(
            db.path(),
            Some(&row.sample_key),
            None,
            start,
            format!(
                "index.sqlite expects key {:?} for sample {local} at this offset, the shard has \
                 key {found:?}",
                row.sample_key
            ),
        )),
        Err((offset, reason)) => {
            Err(shard.changed(shard.idx_path, Some(&row.sample_key), None, offset, reason))
        }
    }
}
