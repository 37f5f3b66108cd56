//! Small file-system helpers: atomic writes, and the staged writes and lock of `prepare`.
//!
//! Every file this crate writes goes through [`AtomicFile`] (or [`atomic_write`]): the bytes go
//! to a temporary file next to the destination (`<name>.tmp`, as Energon names its temporaries),
//! which is flushed, synced and then renamed over the destination. A reader therefore sees the
//! old file or the complete new one, never a torn write, and a failed write leaves no temporary
//! behind.
//!
//! A set of files that must change together goes through [`Staged`] instead, and `prepare` holds
//! a [`PrepareLock`] while it writes.

use std::{
    ffi::OsString,
    fs::{self, File},
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
};

use crate::{Error, Result};

#[cfg(feature = "prepare")]
mod lock;
#[cfg(feature = "prepare")]
mod staged;

#[cfg(all(test, feature = "prepare"))]
pub(crate) use lock::PREPARE_LOCK;
#[cfg(feature = "prepare")]
pub use lock::PrepareLock;
#[cfg(feature = "prepare")]
pub(crate) use staged::{Staged, remove_stale_tmp_files, write_synced, write_unsynced};

/// The temporary name used by this process while writing `path`: `path` with `.<pid>.tmp`
/// appended (`x.tar.idx` → `x.tar.idx.4242.tmp`), so that two processes writing the same file
/// never write into each other's temporary file.
pub(crate) fn process_tmp_path(path: &Path) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

/// The permission bits Energon gives a file derived from `reference`: the reference's mode with
/// owner read and write added (`mode | 0o600`).
///
/// Returns `None` where the reference cannot be inspected or the platform has no Unix modes;
/// callers then keep the default mode of a newly created file.
pub(crate) fn mode_like(reference: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(reference).ok().map(|m| (m.permissions().mode() & 0o7777) | 0o600)
    }
    #[cfg(not(unix))]
    {
        let _ = reference;
        None
    }
}

/// Writes `bytes` to `path` atomically (temporary file in the same folder, sync, rename).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    atomic_write_with_mode(path, bytes, None)
}

/// Like [`atomic_write`], and gives the new file the Unix permission bits `mode` when set.
pub(crate) fn atomic_write_with_mode(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
    if crate::storage::is_remote(path) {
        // One PUT replaces the object at once.
        return crate::storage::write_atomic(path, bytes.to_vec().into())
            .map_err(|e| Error::io("cannot write", path, e));
    }
    let mut file = AtomicFile::create_with_mode(path, mode)?;
    file.write_all(bytes).map_err(|e| Error::io("cannot write", file.tmp_path(), e))?;
    file.commit()
}

/// A file being written under a temporary name, which replaces its destination only on
/// [`AtomicFile::commit`].
///
/// Dropping it uncommitted (an error path, a panic) removes the temporary file. Writes are
/// buffered; [`Write`] errors name no path, so callers wrap them with
/// `Error::io("cannot write", file.tmp_path(), e)`.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    tmp_path: PathBuf,
    mode: Option<u32>,
    writer: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Starts writing `path`: creates (or truncates a stale) `<path>.<pid>.tmp`, a name unique
    /// to the process.
    pub fn create(path: &Path) -> Result<Self> {
        Self::create_with_mode(path, None)
    }

    /// Like [`AtomicFile::create`]; the committed file gets the Unix permission bits `mode`
    /// when set (the mode of a reference file, as prepare gives `.tar.idx` files their shard's).
    pub fn create_with_mode(path: &Path, mode: Option<u32>) -> Result<Self> {
        let tmp_path = process_tmp_path(path);
        let file = File::create(&tmp_path).map_err(|e| Error::io("cannot create", &tmp_path, e))?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            tmp_path,
            mode,
            writer: Some(BufWriter::with_capacity(64 * 1024, file)),
        })
    }

    /// The destination path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary path being written.
    pub fn tmp_path(&self) -> &Path {
        &self.tmp_path
    }

    /// Flushes and syncs the temporary file, applies the mode, and renames it over the
    /// destination; on failure the temporary file is removed.
    pub fn commit(mut self) -> Result<()> {
        // `commit` consumes `self`, so the writer is always there.
        let Some(writer) = self.writer.take() else { return Ok(()) };
        let res = self.finish(writer);
        if res.is_err() {
            let _ = fs::remove_file(&self.tmp_path);
        }
        res
    }

    fn finish(&self, writer: BufWriter<File>) -> Result<()> {
        let file = writer
            .into_inner()
            .map_err(|e| Error::io("cannot write", &self.tmp_path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io("cannot sync", &self.tmp_path, e))?;
        drop(file);
        if let Some(mode) = self.mode {
            set_mode(&self.tmp_path, mode);
        }
        fs::rename(&self.tmp_path, &self.path)
            .map_err(|e| Error::io("cannot rename into place", &self.path, e))?;
        sync_dir(&parent_dir(&self.path));
        Ok(())
    }

    fn writer_mut(&mut self) -> io::Result<&mut BufWriter<File>> {
        // `commit` consumes `self`, so the writer is present for as long as `self` is usable.
        self.writer.as_mut().ok_or_else(|| io::Error::other("atomic file already committed"))
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer_mut()?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer_mut()?.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer_mut()?.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            drop(writer);
            let _ = fs::remove_file(&self.tmp_path);
        }
    }
}

pub(crate) fn set_mode(path: &Path, mode: u32) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(err) = fs::set_permissions(path, fs::Permissions::from_mode(mode)) {
            tracing::debug!("cannot set mode {mode:o} on {}: {err}", path.display());
        }
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
    }
}

pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Makes renames inside `dir` durable: syncs the folder. Best effort, since some file systems
/// refuse to sync a folder (the failure is logged at debug level); the files themselves were
/// synced before they were renamed.
pub(crate) fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    {
        match File::open(dir).and_then(|d| d.sync_all()) {
            Ok(()) => {}
            Err(err) => tracing::debug!("cannot sync folder {}: {err}", dir.display()),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        fs::write(&path, b"old").unwrap();
        atomic_write(&path, b"new contents").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new contents");
        assert!(!process_tmp_path(&path).exists());
    }

    #[test]
    fn dropped_uncommitted_file_leaves_destination_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        fs::write(&path, b"old").unwrap();
        {
            let mut file = AtomicFile::create(&path).unwrap();
            file.write_all(b"partial").unwrap();
            assert!(process_tmp_path(&path).exists());
        }
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(!process_tmp_path(&path).exists());
    }

    #[test]
    fn stale_tmp_file_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.bin");
        fs::write(process_tmp_path(&path), b"stale stale stale").unwrap();
        atomic_write(&path, b"x").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"x");
    }

    #[test]
    fn missing_folder_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/folder/a.bin");
        let err = atomic_write(&path, b"x").unwrap_err();
        assert!(matches!(err, Error::Io { op: "cannot create", .. }), "{err}");
    }

    #[test]
    fn process_tmp_path_appends_the_pid() {
        let pid = std::process::id();
        let want = PathBuf::from(format!("d/x.tar.idx.{pid}.tmp"));
        assert_eq!(process_tmp_path(Path::new("d/x.tar.idx")), want);
    }

    #[cfg(unix)]
    #[test]
    fn mode_is_copied_with_owner_rw() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shard = dir.path().join("s.tar");
        fs::write(&shard, b"").unwrap();
        fs::set_permissions(&shard, fs::Permissions::from_mode(0o440)).unwrap();
        assert_eq!(mode_like(&shard), Some(0o640));
        let path = dir.path().join("s.tar.idx");
        atomic_write_with_mode(&path, b"x", mode_like(&shard)).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o640);

        assert_eq!(mode_like(&dir.path().join("missing")), None);
    }
}
