//! `energon lint`'s check of the shards against their index files: each shard's size against
//! its `.tar.idx` end offset, and every `index.sqlite` row (key, offset, size) against the
//! `.tar.idx` and the tar header at that offset.

use std::{path::Path, sync::Arc};

use energon_index::{
    INDEX_SQLITE, NV_META, info::read_dataset_info, object_versions::ObjectVersions,
    sqlite::SqliteIndex, storage::VersionPin, tar_idx::tar_idx_path,
};

use crate::{
    Error, Result,
    mapped::{OffsetIndex, ShardData, join_rel, remote_message},
    webdataset::verify::{ShardRef, check_row, check_size},
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
        let shard =
            ShardRef { dataset: root, name, idx_path: &idx_path, tar_file_id: tar_file_id as u64 };
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
    Ok(())
}
