//! The `prepare` pipeline: index every shard of a WebDataset and write `.nv-meta/`.
//!
//! Shards are scanned in parallel (`num_workers` threads taking shards in order, within a bounded
//! window of the next shard to write); the scans stream through a bounded channel to one SQLite
//! writer, so memory stays flat whatever the dataset size (the `index` submodule).
//!
//! A prepare holds the dataset's [`PrepareLock`](crate::PrepareLock), writes and syncs every output under a
//! temporary name unique to the process, and only then renames them into place in a fixed order
//! with `.info.json` last (staged renames): a failed or killed prepare leaves the previous
//! index, or a set that readers report as inconsistent, never a silent mix.

use std::{
    fs,
    path::{Path, PathBuf},
};

use crate::{
    Error, INDEX_SQLITE, INFO_JSON, INFO_YAML, NV_META, Result, SPLIT_YAML, discover, fsutil, info,
    jsonl_idx, object_versions::ObjectVersions, split, sqlite, storage, tar_idx, tar_patch,
};

mod index;

use index::{IdxFiles, IndexJob, Scanned, index_shards};

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
    /// `false` for `--no-sample-tables`: write only what loading needs (the `.tar.idx` files,
    /// `.info.json`, the split file) and an `index.sqlite` without the per-sample tables
    /// (`samples`, `sample_parts`; media tables are kept). Lookups by key, `mount`, aux file
    /// stores, joins and media metadata then fail with [`Error::NoSampleTables`] until
    /// `sample_tables_only` adds the tables.
    pub sample_tables: bool,
    /// `--sample-tables-only`: for an already prepared dataset, build only `index.sqlite` (and a
    /// new `index.uuid`) from the shards listed in `.info.json`, checking every shard against its
    /// `.tar.idx`; nothing else is written. Gives the rows a full prepare writes.
    pub sample_tables_only: bool,
    /// `--tmp-path`: the local folder where the index files of a dataset in an object store are
    /// written before they are uploaded (default: the system's temporary folder).
    pub tmp_path: Option<PathBuf>,
    /// Files of `.nv-meta/` (name, content) written in the same commit as the index: the
    /// dataset config, when it is known before the shards are scanned.
    pub config_files: Vec<(String, Vec<u8>)>,
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
            sample_tables: true,
            sample_tables_only: false,
            tmp_path: None,
            config_files: Vec::new(),
        }
    }
}

impl PrepareOptions {
    /// Writes `.nv-meta/<name>` with `content` in the same commit as the index (a failed or
    /// killed prepare leaves the old one with the old index).
    pub fn config_file(mut self, name: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        self.config_files.push((name.into(), content.into()));
        self
    }

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

    /// Whether `index.sqlite` gets the per-sample tables (default `true`; `false` is
    /// `--no-sample-tables`).
    pub fn sample_tables(mut self, sample_tables: bool) -> Self {
        self.sample_tables = sample_tables;
        self
    }

    /// Only build the per-sample tables of an already prepared dataset (`--sample-tables-only`).
    pub fn sample_tables_only(mut self, sample_tables_only: bool) -> Self {
        self.sample_tables_only = sample_tables_only;
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
    /// Shards whose tar ends without an end-of-archive marker, or with data after it (samples
    /// that tar readers lose; see [`crate::Trailer`]): prepared all the same, as the reference
    /// does, to be reported.
    pub trailers: Vec<(String, crate::Trailer)>,
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
    check_options(options)?;
    // Both take the shards of the existing info file.
    let from_info = options.tar_index_only || options.sample_tables_only;
    if from_info && !is_prepared(root) {
        let flag = if options.tar_index_only { "--tar-index-only" } else { "--sample-tables-only" };
        return Err(Error::NotADataset {
            path: root.to_owned(),
            reason: format!("{flag} needs an existing .nv-meta/.info.json"),
        });
    }
    let mut shards = Vec::new();
    // Every shard in the folder, excluded ones too: a killed prepare of another selection may
    // have left temporary files next to any of them.
    let mut discovered = Vec::new();
    if !from_info {
        shards = discover::discover_shards(root)?;
        discovered.clone_from(&shards);
        if let Some(pattern) = &options.exclude {
            shards = discover::apply_exclude(&shards, pattern)?;
        }
        check_not_empty(root, &shards)?;
    }
    let split_parts = if from_info {
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
    let mut old_counts = None;
    if from_info {
        let old = info::read_dataset_info(root)?;
        shards = old.shard_counts.iter().map(|(name, _)| name.clone()).collect();
        check_not_empty(root, &shards)?;
        old_counts = Some(old.shard_counts.into_iter().map(|(_, n)| n).collect::<Vec<_>>());
    }
    let paths: Vec<PathBuf> = shards.iter().map(|s| root.join(s)).collect();
    if !remote {
        let kept: rustc_hash::FxHashSet<&String> = shards.iter().collect();
        let others = discovered.iter().filter(|s| !kept.contains(s)).map(|s| root.join(s));
        let all: Vec<PathBuf> = paths.iter().cloned().chain(others).collect();
        remove_stale_tmp_files(&meta_dir, &all, options);
    }

    // Every file is written under a temporary name first. The renames then go in this order:
    // the `.tar.idx` files, (folders synced) `index.sqlite`, `index.uuid`, the split file and a
    // legacy `.info.yaml`, (folder synced) and `.info.json` last: that rename commits. Readers
    // cross-check `.info.json` with each `.tar.idx` (sample counts) and each shard (size), and
    // `index.sqlite` rows with the shards' headers, so a set cut short is reported, not mixed.
    let mut staged = fsutil::Staged::new(options.tmp_path.as_deref());
    let idx_files = if options.sample_tables_only {
        // Only read, to check that every shard still matches its index.
        IdxFiles::Check(paths.iter().map(|p| tar_idx::tar_idx_path(p)).collect())
    } else {
        // Synced all together by the commit.
        let tmps = paths.iter().map(|p| staged.add_unsynced(&tar_idx::tar_idx_path(p)));
        IdxFiles::Write(tmps.collect())
    };
    staged.barrier();
    let db_path = meta_dir.join(INDEX_SQLITE);
    let db_tmp = staged.add(&db_path);
    let job = IndexJob {
        db_path: &db_path,
        db_tmp: &db_tmp,
        shards: &shards,
        paths: &paths,
        idx_files: &idx_files,
        num_workers: options.num_workers,
        sample_tables: options.sample_tables,
    };
    let index = || index_shards(&job, progress);
    let mut fixed_duplicates = None;
    let mut scanned = match index() {
        Err(Error::DuplicateKey { key, first, second }) if options.fix_duplicates && !remote => {
            progress(Progress::FixingDuplicates { key: key.clone() });
            let members_renamed = fix_duplicates(&shards, &paths)?;
            fixed_duplicates =
                Some(FixedDuplicates { example: (key, first, second), members_renamed });
            index()?
        }
        res => res?,
    };

    if let Some(old_counts) = &old_counts
        && options.sample_tables_only
    {
        check_counts(root, &shards, old_counts, &scanned.shard_counts)?;
    }
    let uuid_tmp = staged.add(&meta_dir.join(crate::INDEX_UUID));
    let index_uuid = sqlite::new_index_uuid();
    fsutil::write_synced(&uuid_tmp, index_uuid.as_bytes(), None)?;
    if remote && scanned.versions.len() == shards.len() {
        let record = ObjectVersions { index_uuid, shards: std::mem::take(&mut scanned.versions) };
        let tmp = staged.add(&meta_dir.join(crate::OBJECT_VERSIONS));
        fsutil::write_synced(&tmp, record.to_json().as_bytes(), None)?;
    }
    if options.sample_tables_only {
        staged.commit()?;
        return Ok(summary(shards, scanned, split_parts, None));
    }
    if !from_info {
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
        for (name, content) in &options.config_files {
            let tmp = staged.add(&meta_dir.join(name));
            fsutil::write_synced(&tmp, content, None)?;
        }
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
    Ok(summary(shards, scanned, split_parts, fixed_duplicates))
}

fn summary(
    shards: Vec<String>,
    scanned: Scanned,
    split_parts: Vec<(String, Vec<String>)>,
    fixed_duplicates: Option<FixedDuplicates>,
) -> PrepareSummary {
    PrepareSummary {
        shards,
        shard_counts: scanned.shard_counts,
        split_parts,
        part_names: scanned.part_names,
        first_keys: scanned.first_keys,
        fixed_duplicates,
        trailers: scanned.trailers,
    }
}

/// Rejects combinations of options that contradict each other.
fn check_options(options: &PrepareOptions) -> Result<()> {
    let conflict = if options.sample_tables_only && options.tar_index_only {
        Some("--sample-tables-only cannot be combined with --tar-index-only")
    } else if options.sample_tables_only && !options.sample_tables {
        Some("--sample-tables-only cannot be combined with --no-sample-tables")
    } else if options.sample_tables_only && options.fix_duplicates {
        Some(
            "--sample-tables-only cannot be combined with --fix-duplicates (which rewrites the shards and their .tar.idx files)",
        )
    } else {
        None
    };
    conflict.map_or(Ok(()), |reason| Err(Error::Config(reason.to_owned())))
}

/// With `--sample-tables-only`: every shard still holds the samples `.info.json` gives it.
fn check_counts(root: &Path, shards: &[String], old: &[u64], new: &[u64]) -> Result<()> {
    for ((shard, &old), &new) in shards.iter().zip(old).zip(new) {
        if old != new {
            return Err(Error::Inconsistent {
                first: root.join(NV_META).join(INFO_JSON),
                second: root.join(shard),
                reason: format!(".info.json gives the shard {old} samples, it holds {new}"),
            });
        }
    }
    Ok(())
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
fn remove_stale_tmp_files(meta_dir: &Path, shards: &[PathBuf], options: &PrepareOptions) {
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
    let meta_names = [INFO_JSON, INFO_YAML, INDEX_SQLITE, crate::INDEX_UUID, ".index.uuid"];
    let names = meta_names
        .iter()
        .map(|n| n.to_string())
        .chain([options.split_config.clone()])
        .chain(options.config_files.iter().map(|(name, _)| name.clone()))
        .collect();
    fsutil::remove_stale_tmp_files(meta_dir, &names);
}

/// Prepares a JSONL dataset: writes `<file>.jsonl.idx` and returns the number of records.
pub fn prepare_jsonl(path: &Path) -> Result<u64> {
    let offsets = jsonl_idx::build_jsonl_offsets(path)?;
    jsonl_idx::write_jsonl_idx(&jsonl_idx::jsonl_idx_path(path), &offsets)?;
    Ok(offsets.len().saturating_sub(1) as u64)
}

#[cfg(test)]
mod tests;
