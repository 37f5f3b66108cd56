//! The media pass of `energon prepare-media` and `prepare --media-metadata-by-...`.
//!
//! - A prepared WebDataset: every shard of `.nv-meta/.info.json` is walked (one task per
//!   shard); each member `<key>.<part>` that the filter takes is probed from the shard's memory
//!   map.
//! - Any other folder (a "filesystem" dataset): every file under it, except those under a
//!   `.nv-meta` folder, sorted by path (one task per file).
//!
//! Tasks run on `num_workers` threads; their rows reach one writer ([`MediaIndexWriter`]) in
//! task order, so the database is the same whatever the thread timing. The writer works on a
//! copy of `index.sqlite` that replaces it only when the whole pass succeeded.
//!
//! A dataset (or folder) in an object store is walked the same way: its objects are listed, each
//! shard or file is downloaded whole into a local working folder (FFmpeg reads video from files),
//! the database is written there and uploaded in one PUT when the pass succeeded. There is no
//! prepare lock in an object store.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
};

use energon_index::{
    INDEX_SQLITE, NV_META,
    discover::{DatasetKind, classify},
    info::read_dataset_info,
    media::{MediaIndexWriter, Metadata, TableMode},
    storage,
    tar_scan::scan_bytes,
};

use super::{AvSource, MediaFilter, Skipped, probe};
use crate::filetype::SIGNATURE_BYTES;
use crate::{
    Error, Result,
    mapped::{join_rel, map_file},
};

/// At most this many skipped entries are kept in [`MediaSummary::skipped`] (all are counted).
pub const MAX_SKIPPED_KEPT: usize = 1000;

/// Options of [`prepare_media`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PrepareMediaOptions {
    /// Which entries are media.
    pub filter: MediaFilter,
    /// Parallel workers (shards or files at a time).
    pub num_workers: usize,
    /// Whether existing media tables are kept and added to (`prepare-media`) or replaced
    /// (`prepare --media-metadata-by-...`).
    pub tables: TableMode,
    /// Where the local working folder of a remote dataset is made (`--tmp-path`; default the
    /// system's temporary folder). Unused for local datasets.
    pub tmp_path: Option<PathBuf>,
}

impl PrepareMediaOptions {
    /// A pass over the entries `filter` selects, keeping or replacing the media tables as
    /// `tables` says, with as many workers as cores and the system's temporary folder.
    pub fn new(filter: MediaFilter, tables: TableMode) -> Self {
        let num_workers = std::thread::available_parallelism().map_or(1, usize::from);
        PrepareMediaOptions { filter, num_workers, tables, tmp_path: None }
    }
}

/// What the pass walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaSourceKind {
    /// The shards of a prepared WebDataset.
    WebDataset,
    /// The files of a plain folder.
    Folder,
}

/// Progress reported during [`prepare_media`].
#[derive(Debug, Clone)]
pub enum Progress {
    /// The tasks are known; the pass starts.
    Start {
        /// What is walked (a task is a shard or a file).
        kind: MediaSourceKind,
        /// Number of tasks.
        n_tasks: usize,
    },
    /// One task is done.
    Task {
        /// Rows it stored.
        n_stored: u64,
    },
}

/// What [`prepare_media`] did.
#[derive(Debug, Clone)]
pub struct MediaSummary {
    /// What was walked.
    pub kind: MediaSourceKind,
    /// Shards or files walked.
    pub n_tasks: usize,
    /// Entries taken for media (rows stored plus entries skipped).
    pub n_media: u64,
    /// Rows stored.
    pub n_stored: u64,
    /// Entries taken for media whose metadata could not be read.
    pub n_skipped: u64,
    /// The first [`MAX_SKIPPED_KEPT`] of them, in walk order.
    pub skipped: Vec<Skipped>,
    /// The database written.
    pub index_path: PathBuf,
}

/// The outcome of one task.
#[derive(Debug, Default)]
struct TaskResult {
    rows: Vec<(String, Metadata)>,
    skipped: Vec<Skipped>,
}

/// Computes the media metadata of the dataset or folder at `root` and writes it to
/// `root/.nv-meta/index.sqlite`.
///
/// Errors: `root` is not a folder (or is a JSONL file or metadataset), a WebDataset without
/// `index.sqlite`, a shard that is missing or damaged, a database that cannot be written.
/// Entries that cannot be probed are not errors (see [`MediaSummary::skipped`]).
pub fn prepare_media(
    root: &Path,
    options: &PrepareMediaOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<MediaSummary> {
    let kind = match classify(root)? {
        DatasetKind::WebDataset => MediaSourceKind::WebDataset,
        DatasetKind::Filesystem | DatasetKind::Folder => MediaSourceKind::Folder,
        DatasetKind::Jsonl | DatasetKind::Metadataset => {
            return Err(Error::Unsupported {
                path: root.to_owned(),
                reason: "media metadata is computed for WebDataset folders and plain folders \
                         only, not for JSONL files or metadatasets"
                    .to_owned(),
            });
        }
    };
    let meta_dir = root.join(NV_META);
    let index_path = meta_dir.join(INDEX_SQLITE);
    let tasks: Vec<Task> = match kind {
        MediaSourceKind::WebDataset => {
            if !storage::is_file(&index_path) {
                return Err(Error::Unsupported {
                    path: root.to_owned(),
                    reason: "the dataset has no .nv-meta/index.sqlite (prepared by energon 5 or \
                             older); run `energon prepare` on it first"
                        .to_owned(),
                });
            }
            let info = read_dataset_info(root)?;
            info.shard_names().map(|name| Task::Shard(name.to_owned())).collect()
        }
        MediaSourceKind::Folder => {
            collect_files(root, &options.filter)?.into_iter().map(Task::File).collect()
        }
    };
    // A remote dataset's database is written in a local working folder, then uploaded.
    let work = if storage::is_remote(root) {
        let base = options.tmp_path.clone().unwrap_or_else(std::env::temp_dir);
        fs::create_dir_all(&base).map_err(|e| Error::io("cannot create", &base, e))?;
        let dir = tempfile::Builder::new()
            .prefix("energon-media-")
            .tempdir_in(&base)
            .map_err(|e| Error::io("cannot create a working folder in", &base, e))?;
        Some(dir)
    } else {
        None
    };
    let (_lock, db_path) = match &work {
        Some(dir) => {
            let local = dir.path().join(INDEX_SQLITE);
            if storage::is_file(&index_path) {
                let copy = storage::local_file(&index_path)
                    .map_err(|e| Error::io("cannot read", &index_path, e))?;
                fs::copy(&copy, &local).map_err(|e| Error::io("cannot copy", &copy, e))?;
            }
            (None, local)
        }
        None => {
            fs::create_dir_all(&meta_dir).map_err(|e| Error::io("cannot create", &meta_dir, e))?;
            // The media tables live in `index.sqlite`, which a concurrent `prepare` replaces.
            let lock = energon_index::PrepareLock::acquire(root, &meta_dir)?;
            (Some(lock), index_path.clone())
        }
    };
    let mut writer = MediaIndexWriter::open(&db_path, options.tables)?;
    progress(Progress::Start { kind, n_tasks: tasks.len() });

    let mut summary = MediaSummary {
        kind,
        n_tasks: tasks.len(),
        n_media: 0,
        n_stored: 0,
        n_skipped: 0,
        skipped: Vec::new(),
        index_path,
    };
    let mut record = |result: TaskResult| -> Result<()> {
        let n = result.rows.len() as u64;
        for (entry_key, metadata) in &result.rows {
            writer.add(entry_key, metadata)?;
        }
        summary.n_stored += n;
        summary.n_skipped += result.skipped.len() as u64;
        summary.n_media += n + result.skipped.len() as u64;
        for skipped in result.skipped {
            tracing::debug!("skipped media entry {}: {}", skipped.entry_key, skipped.reason);
            if summary.skipped.len() < MAX_SKIPPED_KEPT {
                summary.skipped.push(skipped);
            }
        }
        progress(Progress::Task { n_stored: n });
        Ok(())
    };
    let work_dir = work.as_ref().map(tempfile::TempDir::path);
    run_tasks(root, work_dir, &tasks, &options.filter, options.num_workers, &mut record)?;
    writer.finish(options.filter.strategy(), &options.filter.patterns_joined())?;
    if work.is_some() {
        storage::upload(&db_path, &summary.index_path)
            .map_err(|e| Error::io("cannot upload", &summary.index_path, e))?;
    }
    Ok(summary)
}

#[derive(Debug)]
enum Task {
    /// A shard, by its name relative to the root.
    Shard(String),
    /// A file, by its path relative to the root (`/`-separated).
    File(String),
}

/// Runs the tasks on worker threads and hands their results to `record` in task order.
fn run_tasks(
    root: &Path,
    work: Option<&Path>,
    tasks: &[Task],
    filter: &MediaFilter,
    num_workers: usize,
    record: &mut dyn FnMut(TaskResult) -> Result<()>,
) -> Result<()> {
    if tasks.is_empty() {
        return Ok(());
    }
    let n_workers = num_workers.clamp(1, tasks.len());
    let next = AtomicUsize::new(0);
    let cancelled = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel::<(usize, Result<TaskResult>)>(4 * n_workers);
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..n_workers {
            let tx = tx.clone();
            let (next, cancelled) = (&next, &cancelled);
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= tasks.len() || cancelled.load(Ordering::Relaxed) {
                        return;
                    }
                    let res = match &tasks[i] {
                        Task::Shard(name) => shard_task(root, work, name, filter),
                        Task::File(rel) => Ok(file_task(root, work, rel, filter)),
                    };
                    if tx.send((i, res)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        // Results wait here until every earlier task is recorded, so rows go in task order.
        let mut pending: BTreeMap<usize, Result<TaskResult>> = BTreeMap::new();
        let mut next_to_record = 0;
        let mut outcome = Ok(());
        for (i, res) in rx.iter() {
            pending.insert(i, res);
            while let Some(res) = pending.remove(&next_to_record) {
                next_to_record += 1;
                if let Err(err) = res.and_then(&mut *record) {
                    outcome = Err(err);
                    break;
                }
            }
            if outcome.is_err() {
                cancelled.store(true, Ordering::Relaxed);
                break;
            }
        }
        // Dropping the receiver ends workers blocked on a full channel.
        drop(rx);
        outcome
    })
}

/// The bytes of `path` and the local file holding them: the file itself, or (for a remote
/// object) a download into a new file of the working folder `work`, removed when dropped.
fn local_bytes(
    path: &Path,
    work: Option<&Path>,
) -> std::io::Result<(bytes::Bytes, Option<tempfile::TempPath>)> {
    let Some(work) = work.filter(|_| storage::is_remote(path)) else {
        return Ok((map_file(path)?, None));
    };
    let bytes = storage::read(path)?;
    let mut file = tempfile::NamedTempFile::new_in(work)?;
    std::io::Write::write_all(&mut file, &bytes)?;
    Ok((bytes, Some(file.into_temp_path())))
}

/// Probes every member of one shard that the filter takes.
fn shard_task(
    root: &Path,
    work: Option<&Path>,
    shard: &str,
    filter: &MediaFilter,
) -> Result<TaskResult> {
    let path = join_rel(root, shard);
    let (data, copy) = local_bytes(&path, work).map_err(|e| Error::io("cannot read", &path, e))?;
    if data.is_empty() {
        return Err(Error::Index(energon_index::Error::EmptyShard { path }));
    }
    let scan = scan_bytes(&path, &data)?;
    let file = copy.as_deref().unwrap_or(&path);
    let mut result = TaskResult::default();
    for sample in &scan.samples {
        for part in &sample.parts {
            let entry_key = format!("{}.{}", sample.key, part.name);
            if !filter.considers(&entry_key) {
                continue;
            }
            // The scan checked that every member lies inside the shard.
            let start = usize::try_from(part.offset_data).unwrap_or(usize::MAX);
            let end = start.saturating_add(usize::try_from(part.size).unwrap_or(usize::MAX));
            let Some(content) = data.get(start..end) else {
                return Err(Error::Index(energon_index::Error::CorruptTar {
                    path,
                    offset: part.offset_data,
                    reason: format!("member {entry_key:?} runs past the end of the shard"),
                }));
            };
            let source = AvSource { data: content, file: Some((file, part.offset_data)) };
            probe_entry(filter, &entry_key.clone(), entry_key, source, &mut result);
        }
    }
    Ok(result)
}

/// Probes one file of a folder.
fn file_task(root: &Path, work: Option<&Path>, rel: &str, filter: &MediaFilter) -> TaskResult {
    let path = join_rel(root, rel);
    let mut result = TaskResult::default();
    match local_bytes(&path, work) {
        Ok((data, copy)) => {
            let source =
                AvSource { data: &data, file: Some((copy.as_deref().unwrap_or(&path), 0)) };
            // As in the reference, a file's type is decided by its base name.
            let name = rel.rsplit('/').next().unwrap_or(rel);
            probe_entry(filter, name, rel.to_owned(), source, &mut result);
        }
        Err(e) => result
            .skipped
            .push(Skipped { entry_key: rel.to_owned(), reason: format!("cannot read: {e}") }),
    }
    result
}

/// Probes one entry if the filter takes it for media; `name` decides its type, `entry_key` is
/// what is stored.
fn probe_entry(
    filter: &MediaFilter,
    name: &str,
    entry_key: String,
    source: AvSource<'_>,
    result: &mut TaskResult,
) {
    let head = &source.data[..source.data.len().min(SIGNATURE_BYTES)];
    let Some(media_type) = filter.media_type(name, head) else { return };
    match probe(media_type, name, source) {
        Ok(metadata) => result.rows.push((entry_key, metadata)),
        Err(reason) => result.skipped.push(Skipped { entry_key, reason }),
    }
}

/// The files under `root` that the filter may take, as `/`-separated relative paths sorted by
/// path components; folders named `.nv-meta` are not entered and symlinked folders are not
/// followed (symlinked files are read).
fn collect_files(root: &Path, filter: &MediaFilter) -> Result<Vec<String>> {
    let mut res: Vec<Vec<String>> = Vec::new();
    if storage::is_remote(root) {
        let listed = storage::list_files(root).map_err(|e| Error::io("cannot list", root, e))?;
        for object in listed {
            let parts: Vec<String> = object.name.split('/').map(str::to_owned).collect();
            let (name, dirs) = parts.split_last().expect("split gives one part at least");
            if !dirs.iter().any(|d| d == NV_META) && filter.considers(name) {
                res.push(parts);
            }
        }
        res.sort();
        return Ok(res.into_iter().map(|parts| parts.join("/")).collect());
    }
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(root.to_owned(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(|e| Error::io("cannot list", &dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("cannot list", &dir, e))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                tracing::warn!("skipping {}: the name is not UTF-8", entry.path().display());
                continue;
            };
            let file_type =
                entry.file_type().map_err(|e| Error::io("cannot stat", entry.path(), e))?;
            let mut child = rel.clone();
            child.push(name.to_owned());
            if file_type.is_dir() {
                if name != NV_META {
                    stack.push((entry.path(), child));
                }
            } else if filter.considers(name) && entry.path().is_file() {
                res.push(child);
            }
        }
    }
    res.sort();
    Ok(res.into_iter().map(|parts| parts.join("/")).collect())
}
