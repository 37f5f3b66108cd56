//! `energon lint`'s check of the shards against their index files: each shard's size against
//! its `.tar.idx` end offset (and, in an object store, its version against the one recorded by
//! the prepare), every `index.sqlite` sample row (key, offset, size) against the `.tar.idx` and
//! the tar header at that offset, and every `sample_parts` row against the members there.

use std::{path::Path, sync::Arc};

use energon_index::{
    INDEX_SQLITE, NV_META,
    info::read_dataset_info,
    object_versions::ObjectVersions,
    sqlite::{PartRow, SampleRow, SqliteIndex},
    storage::VersionPin,
    tar_idx::tar_idx_path,
    tar_scan::{PaxGlobals, is_skipped, members, split_key_part},
};

use crate::{
    Error, Result,
    mapped::{OffsetIndex, ShardData, join_rel, remote_message},
    webdataset::verify::{ShardRef, check_row, check_size, leading_globals},
};

/// A shard that does not match its index files.
#[derive(Debug)]
pub struct ShardProblem {
    /// The shard name.
    pub shard: String,
    /// What does not match ([`Error::ShardChanged`] or an `Inconsistent` index error).
    pub error: Error,
}

/// Checks every shard of the dataset at `root` against its `.tar.idx` (size) and its rows in
/// `index.sqlite` (count, keys, offsets, sizes), reporting the first problem of each shard.
/// Shards whose `.tar.idx` or data cannot be read are left to [`super::check_index_files`] and
/// the sample reads. Errors only when `.info.json` or `index.sqlite` cannot be opened.
pub fn check_shard_rows(root: &Path) -> Result<Vec<ShardProblem>> {
    let info = read_dataset_info(root)?;
    let db_path = root.join(NV_META).join(INDEX_SQLITE);
    let db = if energon_index::storage::is_file(&db_path) {
        Some(SqliteIndex::open(&db_path)?)
    } else {
        None
    };
    // Prepared with `--no-sample-tables`: no rows to check.
    let db = db.filter(|db| db.schema_version().is_some());
    // A remote dataset's shards are held to the versions its prepare recorded.
    let mut record =
        energon_index::storage::is_remote(root).then(|| ObjectVersions::read(root)).flatten();
    let mut res = Vec::new();
    for (tar_file_id, (name, _)) in info.shard_counts.iter().enumerate() {
        let path = join_rel(root, name);
        let idx_path = tar_idx_path(&path);
        let no_globals = PaxGlobals::default();
        let mut shard = ShardRef {
            dataset: root,
            name,
            idx_path: &idx_path,
            tar_file_id: tar_file_id as u64,
            globals: &no_globals,
        };
        let version = record.as_mut().and_then(|r| r.shards.remove(name));
        let pin = Arc::new(version.map_or_else(VersionPin::new, VersionPin::recorded));
        let data = match ShardData::open(&path, None, &pin) {
            Ok(data) => data,
            Err(err) => {
                if let Some(reason) = remote_message(&err).filter(|_| pin.changed()) {
                    let error = shard.changed(&path, None, None, 0, reason);
                    res.push(ShardProblem { shard: name.clone(), error });
                }
                continue;
            }
        };
        let Ok(idx) = OffsetIndex::open(&idx_path) else { continue };
        let globals = match leading_globals(&data, idx.get(0).unwrap_or(0)) {
            Ok(globals) => globals,
            Err(err) => {
                res.push(ShardProblem {
                    shard: name.clone(),
                    error: Error::io("cannot read", &path, err),
                });
                continue;
            }
        };
        shard.globals = &globals;
        let checked = check_size(&shard, &idx, data.len())
            .and_then(|()| check_trailer(&path, &idx, &data))
            .and_then(|()| db.as_ref().map_or(Ok(()), |db| check_rows(&shard, &idx, &data, db)));
        if let Err(error) = checked {
            res.push(ShardProblem { shard: name.clone(), error });
        }
    }
    Ok(res)
}

/// The end of the shard after its last sample: an end-of-archive marker and nothing else (see
/// [`energon_index::Trailer`]); a shard cut at a member boundary or with another archive appended
/// loses samples that no index shows.
fn check_trailer(path: &Path, idx: &OffsetIndex, data: &ShardData) -> Result<()> {
    let end = idx.get(idx.n_entries().saturating_sub(1)).unwrap_or(0).min(data.len());
    let rest = data.range(end, data.len()).map_err(|e| Error::io("cannot read", path, e))?;
    let trailer = energon_index::Trailer::of(&rest, end);
    let Some(reason) = trailer.problem() else { return Ok(()) };
    let offset = match trailer {
        energon_index::Trailer::DataAfter { offset } => offset,
        _ => end,
    };
    Err(Error::Index(energon_index::Error::CorruptTar { path: path.to_path_buf(), offset, reason }))
}

fn check_rows(
    shard: &ShardRef<'_>,
    idx: &OffsetIndex,
    data: &ShardData,
    db: &SqliteIndex,
) -> Result<()> {
    let rows = db.samples_of_shard(shard.tar_file_id)?;
    let n = idx.n_entries().saturating_sub(1);
    if rows.len() as u64 != n {
        return Err(Error::Index(energon_index::Error::Inconsistent {
            first: db.path().to_path_buf(),
            second: shard.idx_path.to_path_buf(),
            reason: format!(
                "shard {}: index.sqlite has {} rows, the .tar.idx {n} samples",
                shard.name,
                rows.len()
            ),
        }));
    }
    for (i, row) in rows.iter().enumerate() {
        check_row(shard, idx, data, db, i as u64, row)?;
    }
    if db.has_sample_parts() {
        let parts = db.parts_of_shard(shard.tar_file_id)?;
        let mut parts = parts.as_slice();
        for (i, row) in rows.iter().enumerate() {
            let n_rows = parts.iter().take_while(|p| p.sample_index == i as u64).count();
            let (here, rest) = parts.split_at(n_rows);
            check_parts(shard, idx, data, db, (i as u64, row), here)?;
            parts = rest;
        }
        if let Some(extra) = parts.first() {
            return Err(shard.changed(
                db.path(),
                None,
                None,
                extra.content_byte_offset,
                format!(
                    "index.sqlite has part {:?} of sample {}, which the .tar.idx does not have",
                    extra.part_name, extra.sample_index
                ),
            ));
        }
    }
    Ok(())
}

/// Compares the `sample_parts` rows of sample `local` with the members the shard has there:
/// the same parts, at the same data offsets, of the same sizes.
fn check_parts(
    shard: &ShardRef<'_>,
    idx: &OffsetIndex,
    data: &ShardData,
    db: &SqliteIndex,
    (local, row): (u64, &SampleRow),
    parts: &[PartRow],
) -> Result<()> {
    let (start, end) = (row.byte_offset, row.byte_offset + row.byte_size);
    debug_assert_eq!(idx.get(local), Some(start), "checked by check_row");
    let range = data.range(start, end).map_err(|e| Error::io("cannot read", shard.idx_path, e))?;
    let mut found = Vec::new();
    for member in members(&range, start).in_range().with_globals(shard.globals) {
        let member = member.map_err(|e| {
            shard.changed(shard.idx_path, Some(&row.sample_key), None, e.offset, e.reason)
        })?;
        if !member.is_regular() || is_skipped(&member.name) {
            continue;
        }
        if let Some((_, part)) = split_key_part(&member.name) {
            found.push((part.to_owned(), member.offset_data, member.size));
        }
    }
    let indexed: Vec<_> = parts
        .iter()
        .map(|p| (p.part_name.clone(), p.content_byte_offset, p.content_byte_size))
        .collect();
    if indexed == found {
        return Ok(());
    }
    let describe = |parts: &[(String, u64, u64)]| {
        let each: Vec<String> =
            parts.iter().map(|(name, at, size)| format!("{name} at {at} ({size} bytes)")).collect();
        if each.is_empty() { "no parts".to_owned() } else { each.join(", ") }
    };
    Err(shard.changed(
        db.path(),
        Some(&row.sample_key),
        None,
        start,
        format!(
            "index.sqlite gives sample {local} {}, the shard has {}",
            describe(&indexed),
            describe(&found)
        ),
    ))
}
