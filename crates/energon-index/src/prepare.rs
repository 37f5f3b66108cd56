//! The `prepare` pipeline: index every shard of a WebDataset and write `.nv-meta/`.
//!
//! Shards are scanned in parallel (`num_workers` threads taking shards in order); the scans stream
//! through a bounded channel to one SQLite writer, so memory stays flat whatever the dataset size.
//!
//! A prepare holds the dataset's [`PrepareLock`](crate::PrepareLock), writes and syncs every output under a
//! temporary name unique to the process, and only then renames them into place in a fixed order
//! with `.info.json` last (staged renames): a failed or killed prepare leaves the previous
//! index, or a set that readers report as inconsistent, never a silent mix.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
};

use crate::{
    Error, INDEX_SQLITE, INFO_JSON, INFO_YAML, NV_META, Result, SPLIT_YAML, discover, fsutil, info,
    jsonl_idx, shard::ShardScan, split, sqlite, storage, tar_idx, tar_patch, tar_scan,
};

/// How shards are assigned to split parts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SplitChoice {
    /// `--split-parts NAME:REGEX` pairs, in the order given.
    Parts(Vec<(String, String)>),
    /// `--split-ratio`: train, val and test weights.
    Ratio([f64; 3]),
}

/// Options of [`prepare_dataset`], mirroring `energon prepare`'s flags.
///
/// Made from [`PrepareOptions::default`] and its setters (or by setting the fields), so that
/// options added later do not break callers:
///
/// ```
/// use energon_index::prepare::{PrepareOptions, SplitChoice};
///
/// let options = PrepareOptions::default()
///     .split(SplitChoice::Ratio([8.0, 1.0, 1.0]))
///     .num_workers(4);
/// assert_eq!(options.num_workers, 4);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PrepareOptions {
    /// How to split the shards (ignored with `tar_index_only`).
    pub split: SplitChoice,
    /// `--exclude REGEX`: drop shards whose relative path matches anywhere.
    pub exclude: Option<String>,
    /// `--num-workers`: parallel shard scanners.
    pub num_workers: usize,
    /// `--tar-index-only`: only rebuild `.tar.idx`, `index.sqlite` and `index.uuid` for the shards
    /// listed in the existing info file.
    pub tar_index_only: bool,
    /// `--shuffle-tars`: shuffle shards (Python `random.Random(42)`) before a ratio split.
    pub shuffle_tars: bool,
    /// Name of the split file to write inside `.nv-meta/` (`split.yaml`; `.json` names write JSON).
    pub split_config: String,
    /// `--fix-duplicates`: when sample keys repeat across shards, move every member of every
    /// shard into a folder named after its shard, in place (see [`crate::tar_patch`]), and
    /// index again.
    pub fix_duplicates: bool,
    /// `--tmp-path`: the local folder where the index files of a dataset in an object store are
    /// written before they are uploaded (default: the system's temporary folder).
    pub tmp_path: Option<PathBuf>,
}

impl Default for PrepareOptions {
    fn default() -> Self {
        PrepareOptions {
            split: SplitChoice::Ratio([1.0, 0.0, 0.0]),
            exclude: None,
            num_workers: 16,
            tar_index_only: false,
            shuffle_tars: false,
            split_config: SPLIT_YAML.to_owned(),
            fix_duplicates: false,
            tmp_path: None,
        }
    }
}

impl PrepareOptions {
    /// How to split the shards.
    pub fn split(mut self, split: SplitChoice) -> Self {
        self.split = split;
        self
    }

    /// Drops shards whose relative path matches `exclude` anywhere.
    pub fn exclude(mut self, exclude: Option<String>) -> Self {
        self.exclude = exclude;
        self
    }

    /// The local folder for the index files of a remote dataset before their upload.
    pub fn tmp_path(mut self, tmp_path: Option<PathBuf>) -> Self {
        self.tmp_path = tmp_path;
        self
    }

    /// Parallel shard scanners (default 16).
    pub fn num_workers(mut self, num_workers: usize) -> Self {
        self.num_workers = num_workers;
        self
    }

    /// Only rebuild `.tar.idx`, `index.sqlite` and `index.uuid` for the shards listed in the
    /// existing info file.
    pub fn tar_index_only(mut self, tar_index_only: bool) -> Self {
        self.tar_index_only = tar_index_only;
        self
    }

    /// Shuffle the shards (Python `random.Random(42)`) before a ratio split.
    pub fn shuffle_tars(mut self, shuffle_tars: bool) -> Self {
        self.shuffle_tars = shuffle_tars;
        self
    }

    /// The name of the split file inside `.nv-meta/` (default `split.yaml`).
    pub fn split_config(mut self, split_config: impl Into<String>) -> Self {
        self.split_config = split_config.into();
        self
    }

    /// Renames the members of every shard in place when sample keys repeat across shards.
    pub fn fix_duplicates(mut self, fix_duplicates: bool) -> Self {
        self.fix_duplicates = fix_duplicates;
        self
    }
}

/// Progress reported while preparing.
#[derive(Debug, Clone)]
pub enum Progress {
    /// Shards were found; indexing starts.
    Start {
        /// Number of shards to index.
        n_shards: usize,
        /// Total bytes of those shards.
        n_bytes: u64,
    },
    /// One shard was indexed.
    Shard {
        /// Samples found in it.
        n_samples: u64,
        /// Its size in bytes.
        n_bytes: u64,
    },
    /// Sample keys repeat across shards, and `fix_duplicates` renames the shards' members now;
    /// indexing starts again after it.
    FixingDuplicates {
        /// A key that repeats.
        key: String,
    },
}

/// What [`prepare_dataset`] did.
#[derive(Debug, Clone, Default)]
pub struct PrepareSummary {
    /// Shards, relative to the dataset root, in info order.
    pub shards: Vec<String>,
    /// Samples per shard, in info order.
    pub shard_counts: Vec<u64>,
    /// The split parts written: name and shard list.
    pub split_parts: Vec<(String, Vec<String>)>,
    /// Up to 50 distinct part names, in order of first appearance.
    pub part_names: Vec<String>,
    /// Keys of the first two samples of the first shard.
    pub first_keys: Vec<String>,
    /// The duplicate keys that `fix_duplicates` fixed, if there were any.
    pub fixed_duplicates: Option<FixedDuplicates>,
}

/// What `fix_duplicates` did.
#[derive(Debug, Clone)]
pub struct FixedDuplicates {
    /// A key that repeated, and the first two shards it was found in.
    pub example: (String, String, String),
    /// Member headers renamed, over all shards.
    pub members_renamed: u64,
}

impl PrepareSummary {
    /// Total number of samples.
    pub fn n_samples(&self) -> u64 {
        self.shard_counts.iter().sum()
    }
}

/// Whether `root` already holds a prepared dataset (an info file in `.nv-meta/`).
pub fn is_prepared(root: &Path) -> bool {
    let meta = root.join(NV_META);
    storage::is_file(&meta.join(INFO_JSON)) || storage::is_file(&meta.join(INFO_YAML))
}

/// Prepares the WebDataset in `root`: scans all shards, writes every `.tar.idx` and `.nv-meta/`
/// (`.info.json`, split file, `index.sqlite`, `index.uuid`). Does not write `dataset.yaml`.
pub fn prepare_dataset(
    root: &Path,
    options: &PrepareOptions,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<PrepareSummary> {
    let remote = storage::is_remote(root);
    if !storage::is_dir(root) {
        return Err(Error::NotADataset {
            path: root.to_owned(),
            reason: "not a folder (prepare takes a folder of tar shards or a .jsonl file)".into(),
        });
    }
    let meta_dir = root.join(NV_META);
    if options.tar_index_only && !is_prepared(root) {
        return Err(Error::NotADataset {
            path: root.to_owned(),
            reason: "--tar-index-only needs an existing .nv-meta/.info.json".into(),
        });
    }
    let mut shards = Vec::new();
    if !options.tar_index_only {
        shards = discover::discover_shards(root)?;
        if let Some(pattern) = &options.exclude {
            shards = discover::apply_exclude(&shards, pattern)?;
        }
        check_not_empty(root, &shards)?;
    }
    let split_parts = if options.tar_index_only {
        Vec::new()
    } else {
        match &options.split {
            SplitChoice::Parts(patterns) => discover::split_by_patterns(&shards, patterns)?,
            SplitChoice::Ratio(ratio) => {
                discover::split_by_ratio(&shards, *ratio, options.shuffle_tars)?
            }
        }
    };

    // Held until the new index is in place; a second prepare of this dataset fails at once. An
    // object store has no folders and no locks: there the upload order alone keeps the set
    // consistent (`.info.json` last).
    let _lock = if remote {
        None
    } else {
        fs::create_dir_all(&meta_dir).map_err(|e| Error::io("cannot create", &meta_dir, e))?;
        Some(fsutil::PrepareLock::acquire(root, &meta_dir)?)
    };
    if options.tar_index_only {
        let old = info::read_dataset_info(root)?;
        shards = old.shard_counts.iter().map(|(name, _)| name.clone()).collect();
        check_not_empty(root, &shards)?;
    }
    let paths: Vec<PathBuf> = shards.iter().map(|s| root.join(s)).collect();
    if !remote {
        remove_stale_tmp_files(&meta_dir, &paths, &options.split_config);
    }

    // Every file is written under a temporary name first. The renames then go in this order:
    // the `.tar.idx` files, (folders synced) `index.sqlite`, `index.uuid`, the split file and a
    // legacy `.info.yaml`, (folder synced) and `.info.json` last: that rename commits. Readers
    // cross-check `.info.json` with each `.tar.idx` (sample counts) and each shard (size), and
    // `index.sqlite` rows with the shards' headers, so a set cut short is reported, not mixed.
    let mut staged = fsutil::Staged::new(options.tmp_path.as_deref());
    let idx_tmps: Vec<PathBuf> =
        paths.iter().map(|p| staged.add(&tar_idx::tar_idx_path(p))).collect();
    staged.barrier();
    let db_path = meta_dir.join(INDEX_SQLITE);
    let db_tmp = staged.add(&db_path);
    let index = || {
        index_shards(&db_path, &db_tmp, &shards, &paths, &idx_tmps, options.num_workers, progress)
    };
    let mut fixed_duplicates = None;
    let scanned = match index() {
        Err(Error::DuplicateKey { key, first, second }) if options.fix_duplicates && !remote => {
            progress(Progress::FixingDuplicates { key: key.clone() });
            let members_renamed = fix_duplicates(&shards, &paths)?;
            fixed_duplicates =
                Some(FixedDuplicates { example: (key, first, second), members_renamed });
            index()?
        }
        res => res?,
    };

    let uuid_tmp = staged.add(&meta_dir.join(crate::INDEX_UUID));
    fsutil::write_synced(&uuid_tmp, sqlite::new_index_uuid().as_bytes(), None)?;
    if !options.tar_index_only {
        let config = split::SplitConfig {
            split_parts: split_parts
                .iter()
                .map(|(name, list)| (name.clone(), split::collapse(list)))
                .collect(),
            exclude: Vec::new(),
        };
        let text = split::split_config_bytes(&config, &options.split_config)?;
        let split_tmp = staged.add(&meta_dir.join(&options.split_config));
        fsutil::write_synced(&split_tmp, text.as_bytes(), None)?;
    }
    let shard_counts: Vec<(String, u64)> =
        shards.iter().cloned().zip(scanned.shard_counts.iter().copied()).collect();
    let new_info = info::DatasetInfo {
        energon_version: Some(crate::ENERGON_FORMAT_VERSION.to_owned()),
        shard_counts,
    };
    if storage::is_file(&meta_dir.join(INFO_YAML)) {
        // Keep a legacy info file in sync, as the reference does.
        let yaml_tmp = staged.add(&meta_dir.join(INFO_YAML));
        fsutil::write_synced(&yaml_tmp, info::info_yaml_bytes(&new_info).as_bytes(), None)?;
    }
    staged.barrier();
    let info_tmp = staged.add(&meta_dir.join(INFO_JSON));
    fsutil::write_synced(&info_tmp, info::info_json_bytes(&new_info).as_bytes(), None)?;
    staged.commit()?;
    Ok(PrepareSummary {
        shards,
        shard_counts: scanned.shard_counts,
        split_parts,
        part_names: scanned.part_names,
        first_keys: scanned.first_keys,
        fixed_duplicates,
    })
}

/// Moves the members of every shard into a folder named after the shard, once every shard was
/// found to allow it; returns the number of renamed member headers.
fn fix_duplicates(shards: &[String], paths: &[PathBuf]) -> Result<u64> {
    for (shard, path) in shards.iter().zip(paths) {
        tar_patch::check_prefix(path, &tar_patch::shard_prefix(shard))?;
    }
    let mut renamed = 0;
    for (shard, path) in shards.iter().zip(paths) {
        renamed += tar_patch::apply_prefix(path, &tar_patch::shard_prefix(shard))?;
    }
    Ok(renamed)
}

fn check_not_empty(root: &Path, shards: &[String]) -> Result<()> {
    if shards.is_empty() {
        return Err(Error::NotADataset {
            path: root.to_owned(),
            reason: "no *.tar or *.tgz shards found".into(),
        });
    }
    Ok(())
}

/// Removes temporary files that an earlier prepare left behind when it was killed: those of the
/// `.tar.idx` files next to `shards` and of the files of `.nv-meta/`. Called with the lock held.
fn remove_stale_tmp_files(meta_dir: &Path, shards: &[PathBuf], split_config: &str) {
    let mut by_dir: rustc_hash::FxHashMap<PathBuf, rustc_hash::FxHashSet<String>> =
        rustc_hash::FxHashMap::default();
    for shard in shards {
        let idx = tar_idx::tar_idx_path(shard);
        if let Some(name) = idx.file_name().and_then(|n| n.to_str()) {
            by_dir.entry(fsutil::parent_dir(&idx)).or_default().insert(name.to_owned());
        }
    }
    for (dir, names) in &by_dir {
        fsutil::remove_stale_tmp_files(dir, names);
    }
    let meta_names =
        [INFO_JSON, INFO_YAML, INDEX_SQLITE, crate::INDEX_UUID, ".index.uuid", split_config];
    fsutil::remove_stale_tmp_files(meta_dir, &meta_names.iter().map(|n| n.to_string()).collect());
}

#[derive(Debug, Default)]
struct Scanned {
    shard_counts: Vec<u64>,
    part_names: Vec<String>,
    first_keys: Vec<String>,
}

fn index_shards(
    db_path: &Path,
    db_tmp: &Path,
    shards: &[String],
    paths: &[PathBuf],
    idx_tmps: &[PathBuf],
    num_workers: usize,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Scanned> {
    let mut shard_bytes = Vec::with_capacity(paths.len());
    for path in paths {
        if storage::is_remote(path) {
            shard_bytes.push(storage::size(path).map_err(|e| Error::io("cannot open", path, e))?);
            continue;
        }
        let meta = fs::metadata(path).map_err(|e| Error::io("cannot open", path, e))?;
        if !meta.is_file() {
            // A FIFO or device named like a shard would block or never end.
            return Err(Error::NotAFile { path: path.clone() });
        }
        shard_bytes.push(meta.len());
    }
    progress(Progress::Start { n_shards: paths.len(), n_bytes: shard_bytes.iter().sum() });

    let _ = fs::remove_file(db_tmp);
    let mut writer = sqlite::SqliteIndexWriter::create(db_tmp)?;
    if storage::is_file(db_path) {
        let local =
            storage::local_file(db_path).map_err(|e| Error::io("cannot read", db_path, e))?;
        writer.copy_media_tables_from(&local)?;
    }
    let n_workers = num_workers.clamp(1, paths.len());
    let mut scanned = Scanned { shard_counts: vec![0; paths.len()], ..Scanned::default() };
    // Workers take shards in order from a shared counter and stream their scans to this thread,
    // the single SQLite writer; the bounded channel keeps memory flat.
    let next_shard = AtomicUsize::new(0);
    let cancelled = AtomicBool::new(false);
    let (tx, rx) = mpsc::sync_channel::<(usize, ShardScan)>(2 * n_workers);
    std::thread::scope(|scope| -> Result<()> {
        let mut workers = Vec::with_capacity(n_workers);
        for _ in 0..n_workers {
            let tx = tx.clone();
            let (next_shard, cancelled) = (&next_shard, &cancelled);
            workers.push(scope.spawn(move || -> Result<(), (usize, Error)> {
                loop {
                    let i = next_shard.fetch_add(1, Ordering::Relaxed);
                    if i >= paths.len() || cancelled.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    let res = scan_one(&paths[i], &idx_tmps[i]);
                    let scan = match res {
                        Ok(scan) => scan,
                        Err(err) => {
                            cancelled.store(true, Ordering::Relaxed);
                            return Err((i, err));
                        }
                    };
                    if tx.send((i, scan)).is_err() {
                        // The writer failed and reports its own error.
                        return Ok(());
                    }
                }
            }));
        }
        drop(tx);
        let mut write_res = Ok(());
        for (i, scan) in rx.iter() {
            write_res = record_shard(&mut writer, &mut scanned, i, shards, &scan);
            if write_res.is_err() {
                cancelled.store(true, Ordering::Relaxed);
                break;
            }
            progress(Progress::Shard {
                n_samples: scan.samples.len() as u64,
                n_bytes: shard_bytes[i],
            });
        }
        drop(rx);
        // Of several failing shards, report the first in shard order.
        let mut first_err: Option<(usize, Error)> = None;
        for worker in workers {
            let res =
                worker.join().map_err(|_| Error::Config("a prepare worker panicked".into()))?;
            if let Err((i, err)) = res
                && first_err.as_ref().is_none_or(|(j, _)| i < *j)
            {
                first_err = Some((i, err));
            }
        }
        if let Some((_, err)) = first_err {
            return Err(err);
        }
        write_res
    })?;
    writer.finish()?;
    Ok(scanned)
}

fn record_shard(
    writer: &mut sqlite::SqliteIndexWriter,
    scanned: &mut Scanned,
    i: usize,
    shards: &[String],
    scan: &ShardScan,
) -> Result<()> {
    writer.add_shard(i as u64, &shards[i], scan)?;
    scanned.shard_counts[i] = scan.samples.len() as u64;
    if i == 0 {
        scanned.first_keys = scan.samples.iter().take(2).map(|s| s.key.clone()).collect();
    }
    if scanned.part_names.len() < 50 {
        for part in scan.samples.iter().flat_map(|s| &s.parts) {
            if scanned.part_names.len() >= 50 {
                break;
            }
            if !scanned.part_names.contains(&part.name) {
                scanned.part_names.push(part.name.clone());
            }
        }
    }
    Ok(())
}

fn scan_one(path: &Path, idx_tmp: &Path) -> Result<ShardScan> {
    // `scan_shard` reports a shard without samples as `EmptyShard`.
    let scan = tar_scan::scan_shard(path)?;
    let offsets = scan.offsets();
    tar_idx::check_offsets(idx_tmp, &offsets, tar_idx::Check::Write)?;
    fsutil::write_synced(idx_tmp, &tar_idx::encode_offsets(&offsets), fsutil::mode_like(path))?;
    Ok(scan)
}

/// Prepares a JSONL dataset: writes `<file>.jsonl.idx` and returns the number of records.
pub fn prepare_jsonl(path: &Path) -> Result<u64> {
    let offsets = jsonl_idx::build_jsonl_offsets(path)?;
    jsonl_idx::write_jsonl_idx(&jsonl_idx::jsonl_idx_path(path), &offsets)?;
    Ok(offsets.len().saturating_sub(1) as u64)
}

#[cfg(test)]
mod tests;
