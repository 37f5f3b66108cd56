//! [`Staged`]: a set of files written under temporary names and renamed into place in a fixed
//! order, so that the last rename commits the set.
//!
//! Every temporary name is unique to the process (`<name>.<pid>.tmp`, see [`process_tmp_path`]),
//! so a stale temporary left by a killed process is never written into by another one. Files are
//! synced before they are renamed; [`Staged::barrier`] marks that every rename before it must be
//! durable (its folder synced) before any rename after it is made, which keeps the order of the
//! renames across a power loss.

use std::{
    fs::{self, File},
    io::Write as _,
    path::{Path, PathBuf},
};

use rustc_hash::FxHashSet;

use super::{parent_dir, process_tmp_path, set_mode, sync_dir};
use crate::{Error, Result};

/// Writes `bytes` to a new file at `path` (replacing a stale one), syncs it to disk and gives it
/// the Unix permission bits `mode` when set.
pub(crate) fn write_synced(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
    let mut file = File::create(path).map_err(|e| Error::io("cannot create", path, e))?;
    file.write_all(bytes).map_err(|e| Error::io("cannot write", path, e))?;
    file.sync_all().map_err(|e| Error::io("cannot sync", path, e))?;
    drop(file);
    if let Some(mode) = mode {
        set_mode(path, mode);
    }
    Ok(())
}

/// Writes `bytes` to a new file at `path` like [`write_synced`], without syncing it: for a file
/// added with [`Staged::add_unsynced`], which syncs all such files at once before the renames.
pub(crate) fn write_unsynced(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
    fs::write(path, bytes).map_err(|e| Error::io("cannot write", path, e))?;
    if let Some(mode) = mode {
        set_mode(path, mode);
    }
    Ok(())
}

/// Files written under temporary names that replace their destinations only on
/// [`Staged::commit`], in the order they were added.
///
/// Dropping it uncommitted (an error path, a panic) removes every temporary file that was not
/// renamed yet.
///
/// A destination in an object store gets its temporary file in a local folder (under the
/// `tmp_dir` given to [`Staged::new`], else the system's temporary folder) and is uploaded on
/// commit, in the same order; an object PUT replaces the object at once.
#[derive(Debug)]
pub(crate) struct Staged {
    /// Where temporary files of remote destinations go (created on first use).
    remote_tmp: PathBuf,
    /// (temporary path, destination) in commit order.
    files: Vec<(PathBuf, PathBuf)>,
    /// Positions in `files` of the files that [`Staged::commit`] syncs before the renames.
    unsynced: Vec<usize>,
    /// Positions in `files` before which all earlier renames are made durable.
    barriers: Vec<usize>,
    /// How many files have been renamed into place.
    committed: usize,
}

impl Staged {
    /// An empty set; temporary files of remote destinations go under `tmp_dir`.
    pub(crate) fn new(tmp_dir: Option<&Path>) -> Self {
        let base = tmp_dir.map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
        Staged {
            remote_tmp: base.join(format!("energon-prepare-{}", std::process::id())),
            files: Vec::new(),
            unsynced: Vec::new(),
            barriers: Vec::new(),
            committed: 0,
        }
    }

    /// Registers `dst` and returns the temporary path to write it to (see [`process_tmp_path`]).
    /// The caller writes and syncs the temporary file (for example with [`write_synced`]).
    pub(crate) fn add(&mut self, dst: &Path) -> PathBuf {
        let tmp = if crate::storage::is_remote(dst) {
            // A failure to create the folder shows when the temporary file is written.
            let _ = fs::create_dir_all(&self.remote_tmp);
            let name = dst.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
            self.remote_tmp.join(format!("{}-{name}", self.files.len()))
        } else {
            process_tmp_path(dst)
        };
        self.files.push((tmp.clone(), dst.to_path_buf()));
        tmp
    }

    /// Like [`add`](Self::add), for a file written without syncing it ([`write_unsynced`]):
    /// [`commit`](Self::commit) makes all such files durable together before the first rename
    /// (one `syncfs` per file system on Linux instead of thousands of `fsync`s).
    pub(crate) fn add_unsynced(&mut self, dst: &Path) -> PathBuf {
        self.unsynced.push(self.files.len());
        self.add(dst)
    }

    /// Every file added so far is renamed, and its folder synced, before any file added later
    /// is renamed.
    pub(crate) fn barrier(&mut self) {
        self.barriers.push(self.files.len());
    }

    /// Renames every temporary file over its destination in order, syncing the folders of the
    /// renamed files at each barrier and at the end.
    ///
    /// A failing rename stops the commit: files before it are in place, the temporary files of
    /// the rest are removed, and the error says how many were replaced.
    pub(crate) fn commit(mut self) -> Result<()> {
        let unsynced: Vec<&Path> =
            self.unsynced.iter().map(|&i| self.files[i].0.as_path()).collect();
        sync_files(&unsynced)?;
        let mut dirs: FxHashSet<PathBuf> = FxHashSet::default();
        let n = self.files.len();
        for i in 0..n {
            if self.barriers.contains(&i) {
                sync_dirs(&mut dirs);
            }
            #[cfg(debug_assertions)]
            pause_for_tests(i, n);
            let (tmp, dst) = &self.files[i];
            let res = if crate::storage::is_remote(dst) {
                crate::storage::upload(tmp, dst).map(|()| {
                    let _ = fs::remove_file(tmp);
                })
            } else {
                fs::rename(tmp, dst)
            };
            if let Err(e) = res {
                let op = if i == 0 {
                    "cannot rename into place (no index file was replaced)"
                } else {
                    "cannot rename into place (the index is now partly replaced; readers report \
                     it as inconsistent until a prepare succeeds)"
                };
                return Err(Error::io(op, dst, e));
            }
            self.committed = i + 1;
            if !crate::storage::is_remote(dst) {
                dirs.insert(parent_dir(dst));
            }
        }
        sync_dirs(&mut dirs);
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        for (tmp, _) in &self.files[self.committed..] {
            // Best effort: the temporary file may never have been created.
            let _ = fs::remove_file(tmp);
        }
        // Only removed when empty (it holds nothing but this set's files).
        let _ = fs::remove_dir(&self.remote_tmp);
    }
}

/// Debug builds only: with `ENERGON_TEST_COMMIT_PAUSE=<i>` a commit stops before its rename
/// number `i` (from 0), says so in the log (a warning) and waits to be killed: how the fault tests kill a
/// prepare inside its commit window rather than at random points.
#[cfg(debug_assertions)]
fn pause_for_tests(i: usize, n: usize) {
    let at = std::env::var("ENERGON_TEST_COMMIT_PAUSE").ok().and_then(|v| v.parse().ok());
    if at == Some(i) {
        // The fault tests wait for this line on stderr (the command's log).
        tracing::warn!("commit paused before rename {i} of {n}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }
}

/// Makes the written files durable: on Linux one `syncfs` per file system they are on (falling
/// back to syncing each file), elsewhere each file.
fn sync_files(paths: &[&Path]) -> Result<()> {
    let fsync = |path: &Path| {
        File::open(path).and_then(|f| f.sync_all()).map_err(|e| Error::io("cannot sync", path, e))
    };
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt as _;
        let mut by_device: rustc_hash::FxHashMap<u64, Vec<&Path>> = Default::default();
        for &path in paths {
            let meta = fs::metadata(path).map_err(|e| Error::io("cannot stat", path, e))?;
            by_device.entry(meta.dev()).or_default().push(path);
        }
        for group in by_device.values() {
            let synced = File::open(group[0])
                .and_then(|file| nix::unistd::syncfs(&file).map_err(std::io::Error::from));
            if let Err(err) = synced {
                tracing::debug!("syncfs failed ({err}); syncing {} files one by one", group.len());
                group.iter().try_for_each(|path| fsync(path))?;
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        paths.iter().try_for_each(|path| fsync(path))
    }
}

fn sync_dirs(dirs: &mut FxHashSet<PathBuf>) {
    for dir in dirs.drain() {
        sync_dir(&dir);
    }
}

/// Removes the temporary files that any process left for the destinations `names` inside `dir`:
/// `<name>.tmp` (the names of earlier versions) and `<name>.<digits>.tmp` ([`process_tmp_path`]). Only
/// safe while holding the prepare lock of the dataset.
pub(crate) fn remove_stale_tmp_files(dir: &Path, names: &FxHashSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".tmp") else {
            continue;
        };
        let base = match stem.rsplit_once('.') {
            Some((base, pid)) if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => base,
            _ => stem,
        };
        if (names.contains(base) || names.contains(stem)) && entry.path().is_file() {
            tracing::debug!("removing stale temporary file {}", entry.path().display());
            let _ = fs::remove_file(entry.path());
        }
    }
}
