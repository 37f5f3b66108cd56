//! `.nv-meta/object-versions.json`: the version (size and entity tag) of every shard object of a
//! dataset prepared in an object store, which its readers hold each shard to (see
//! [`storage::VersionPin`]). Written by a prepare of a remote dataset, in the same commit as the
//! rest of the index; the reference has no such file and ignores it.
//!
//! The record names the `index.uuid` of the prepare that wrote it: a dataset prepared again by a
//! tool that does not write the record has another UUID, and its stale record is ignored.

use std::{collections::BTreeMap, path::Path};

use serde::{Deserialize, Serialize};

use crate::{INDEX_UUID, NV_META, OBJECT_VERSIONS, storage, storage::ObjectVersion};

/// The versions of a dataset's shard objects (see the [module](self) documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectVersions {
    /// The `index.uuid` written by the same prepare.
    pub index_uuid: String,
    /// Shard name (relative to the dataset root) → its version when it was scanned.
    pub shards: BTreeMap<String, ObjectVersion>,
}

impl ObjectVersions {
    /// The file's content: pretty-printed JSON and a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a record serializes");
        text.push('\n');
        text
    }

    /// The current record of the dataset at `root`: `None` where there is none, or it is stale
    /// (another `index.uuid`) or unreadable (then the readers pin the first version they see).
    pub fn read(root: &Path) -> Option<ObjectVersions> {
        let meta = root.join(NV_META);
        let path = meta.join(OBJECT_VERSIONS);
        let text = storage::read(&path)
            .map_err(|err| {
                if err.kind() != std::io::ErrorKind::NotFound {
                    tracing::debug!("no object versions from {}: {err}", path.display());
                }
            })
            .ok()?;
        let record: ObjectVersions = serde_json::from_slice(&text)
            .map_err(|err| {
                tracing::warn!(
                    "{} is not an object-version record ({err}): reads pin the first version \
                     of each shard instead",
                    path.display()
                );
            })
            .ok()?;
        let uuid = storage::read(&meta.join(INDEX_UUID)).ok()?;
        if String::from_utf8_lossy(&uuid).trim() != record.index_uuid {
            tracing::debug!("{} is stale (another index.uuid)", path.display());
            return None;
        }
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_read_only_with_its_own_index_uuid() {
        let dir = tempfile::tempdir().unwrap();
        let meta = dir.path().join(NV_META);
        std::fs::create_dir(&meta).unwrap();
        let record = ObjectVersions {
            index_uuid: "u1".to_owned(),
            shards: BTreeMap::from([(
                "a.tar".to_owned(),
                ObjectVersion { size: 3, e_tag: Some("\"x\"".to_owned()), last_modified: None },
            )]),
        };
        std::fs::write(meta.join(OBJECT_VERSIONS), record.to_json()).unwrap();
        assert_eq!(ObjectVersions::read(dir.path()), None, "no index.uuid");
        std::fs::write(meta.join(INDEX_UUID), "u1").unwrap();
        assert_eq!(ObjectVersions::read(dir.path()), Some(record));
        std::fs::write(meta.join(INDEX_UUID), "u2").unwrap();
        assert_eq!(ObjectVersions::read(dir.path()), None, "stale");
        std::fs::write(meta.join(INDEX_UUID), "u1").unwrap();
        std::fs::write(meta.join(OBJECT_VERSIONS), "{").unwrap();
        assert_eq!(ObjectVersions::read(dir.path()), None, "unreadable");
    }
}
