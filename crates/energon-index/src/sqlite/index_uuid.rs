//! `.nv-meta/index.uuid`: a random UUID naming one preparation run.

use std::{
    fs::{self, File},
    io::Write as _,
    path::Path,
};

use crate::{Error, INDEX_UUID, Result};

/// Writes a fresh random UUID (version 4, 36 characters, lowercase, no newline) to
/// `<nv_meta_dir>/index.uuid`, atomically (temporary file in the same folder, then rename), and
/// returns it.
///
/// The UUID is the cache key of metadataset join indexes: a new one invalidates them. It is the
/// only randomness in preparation and never affects data order.
pub fn write_index_uuid(nv_meta_dir: &Path) -> Result<String> {
    let uuid = new_index_uuid();
    let path = nv_meta_dir.join(INDEX_UUID);
    let tmp = nv_meta_dir.join(format!(".{INDEX_UUID}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(uuid.as_bytes())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &path)
    };
    if let Err(e) = write() {
        // Best effort: the temporary file may not even exist.
        let _ = fs::remove_file(&tmp);
        return Err(Error::io("cannot write", path, e));
    }
    Ok(uuid)
}

/// A fresh random UUID (version 4, 36 characters, lowercase), the content of `index.uuid`.
pub fn new_index_uuid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// Reads `<nv_meta_dir>/index.uuid` verbatim (no trimming: the content enters join-index hashes
/// byte for byte, as in the reference).
pub fn read_index_uuid(nv_meta_dir: &Path) -> Result<String> {
    let path = nv_meta_dir.join(INDEX_UUID);
    let bytes = crate::storage::read(&path).map_err(|e| Error::io("cannot read", &path, e))?;
    String::from_utf8(bytes.to_vec()).map_err(|e| Error::BadMetadata {
        path,
        reason: format!("not UTF-8 at byte offset {}", e.utf8_error().valid_up_to()),
    })
}
