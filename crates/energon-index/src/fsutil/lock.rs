//! [`PrepareLock`]: the exclusive lock that keeps two prepares of one dataset from interleaving.
//!
//! The lock is an advisory `flock`-style lock ([`File::try_lock`]) on `.nv-meta/.prepare.lock`,
//! taken without waiting. The operating system releases it when the holder exits, however it
//! exits (a `kill -9` included), so a stale lock file never blocks a later prepare; the file
//! itself stays and is empty.

use std::{
    fs::{File, OpenOptions, TryLockError},
    path::{Path, PathBuf},
};

use crate::{Error, Result};

/// File name of the prepare lock inside `.nv-meta/`.
pub(crate) const PREPARE_LOCK: &str = ".prepare.lock";

/// An exclusive lock on one dataset's index, held until dropped.
#[derive(Debug)]
pub struct PrepareLock {
    path: PathBuf,
    _file: File,
}

impl PrepareLock {
    /// Takes the lock of the dataset at `dataset`, whose metadata folder `meta_dir` must exist.
    ///
    /// Fails at once with [`Error::Busy`] when another process holds it.
    pub fn acquire(dataset: &Path, meta_dir: &Path) -> Result<Self> {
        let path = meta_dir.join(PREPARE_LOCK);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("cannot open the prepare lock", &path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(PrepareLock { path, _file: file }),
            Err(TryLockError::WouldBlock) => {
                Err(Error::Busy { dataset: dataset.to_path_buf(), lock: path })
            }
            Err(TryLockError::Error(e)) => Err(Error::io("cannot lock", &path, e)),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
