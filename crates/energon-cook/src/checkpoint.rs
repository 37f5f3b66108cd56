//! Loader checkpoints: the saved state of a rank's loader, and the versioned file format that
//! holds it (documented in `docs/format/checkpoint.md`).
//!
//! A [`LoaderState`] is what `Loader::save_state` returns (the reference's
//! `SavableDataLoaderState`): per worker, the whole pipeline's progress as a [`StageState`] tree
//! and the number of items to replay after restoring it (0 unless a stage could not be saved),
//! the worker whose turn is next, the micro batch size, and the loader's configuration, which a
//! restore compares with its own. A [`Checkpoint`] is one or several ranks' states as a file:
//! a compact binary encoding (postcard, with a header and a checksum) or JSON for humans, both
//! starting with `{format, version}`, written atomically.

use std::{
    collections::BTreeMap,
    fs,
    io::Write,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

use serde::{Deserialize, Serialize};

pub use crate::elastic::Reshaped;
use crate::{
    error::{ConfigDifference, Error, Result},
    state::StageState,
};

/// The `format` of every checkpoint file.
pub const CHECKPOINT_FORMAT: &str = "energon-rs-checkpoint";

/// The format version this build writes (and the newest it reads).
pub const CHECKPOINT_VERSION: u32 = 3;

/// The oldest format version this build reads.
pub const OLDEST_CHECKPOINT_VERSION: u32 = 3;

/// A description of a loader: dataset, pipeline settings, worker configuration, task encoder
/// settings, as `key = value` entries (the reference's `loader.config()`). Restoring a
/// checkpoint compares the checkpoint's with the loader's; keys with a `.`-separated part
/// starting with `_` (paths, the task encoder's class) are informative and not compared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineConfig(pub BTreeMap<String, String>);

impl PipelineConfig {
    /// Sets an entry.
    pub fn insert(&mut self, key: impl Into<String>, value: impl ToString) {
        self.0.insert(key.into(), value.to_string());
    }

    /// An entry.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The compared entries that differ between a checkpoint's configuration (`self`) and a
    /// loader's, except those in `ignore`.
    pub fn differences(&self, loader: &PipelineConfig, ignore: &[&str]) -> Vec<ConfigDifference> {
        let keys: std::collections::BTreeSet<&String> =
            self.0.keys().chain(loader.0.keys()).collect();
        keys.into_iter()
            .filter(|k| !k.split('.').any(|part| part.starts_with('_')))
            .filter(|k| !ignore.contains(&k.as_str()))
            .filter_map(|k| {
                let (a, b) = (self.0.get(k), loader.0.get(k));
                (a != b).then(|| ConfigDifference {
                    key: k.clone(),
                    checkpoint: a.cloned(),
                    loader: b.cloned(),
                })
            })
            .collect()
    }
}

/// The saved state of one rank's loader (the reference's `SavableDataLoaderState`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderState {
    /// The rank.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// Workers per rank as configured (0: loading in the main thread).
    pub num_workers: usize,
    /// The local worker whose item is handed out next.
    pub next_worker: usize,
    /// The batch size (`None`: a loader of samples).
    pub micro_batch_size: Option<usize>,
    /// Each local worker's state, in order.
    pub workers: Vec<WorkerState>,
    /// The loader's configuration.
    pub config: PipelineConfig,
    /// Set by [`Checkpoint::reshape`] for another number of workers: every old worker's state,
    /// whose remaining passes a restore deals to this rank's workers (whose own states are then
    /// fresh).
    pub reshaped: Option<Box<Reshaped>>,
}

/// The saved state of one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerState {
    /// The global worker id (its slices and seeds depend only on it).
    pub global_worker_id: usize,
    /// The pipeline's progress; `None`: a fresh pipeline.
    pub state: Option<StageState>,
    /// Items to make and drop after restoring `state` (the reference's checkpoint offset).
    pub replay: u64,
    /// The worker's pass had ended while the other workers' had not.
    pub exhausted: bool,
}

/// The configuration entries of the worker configuration.
pub(crate) const RANK_KEY: &str = "worker_config.rank";
pub(crate) const WORLD_SIZE_KEY: &str = "worker_config.world_size";
pub(crate) const NUM_WORKERS_KEY: &str = "worker_config.num_workers";
/// The configuration entry of how often the workers reported their state (informative: a
/// restore may use another frequency; it bounds the items a saved state may replay).
pub(crate) const CHECKPOINT_EVERY_KEY: &str = "_checkpoint_every";
/// The configuration entry of the batch size (not compared: a smaller micro batch is allowed).
pub(crate) const BATCH_SIZE_KEY: &str = "batch_size";

impl LoaderState {
    /// Checks that this state can be restored into a loader with `config` and `batch_size`,
    /// and returns the replay factor for a smaller micro batch (`old / new`).
    ///
    /// The rules are the reference's: the configurations must agree (a different dataset,
    /// setting or number of workers is refused, with what differs); the micro batch may only
    /// shrink by a divisor of the old one, and batching cannot be switched on or off.
    pub fn check_restore(&self, config: &PipelineConfig, batch_size: Option<usize>) -> Result<u64> {
        let differences = self.config.differences(config, &[BATCH_SIZE_KEY]);
        if !differences.is_empty() {
            return Err(Error::ConfigMismatch { differences });
        }
        let n_local = self.num_workers.max(1);
        if self.workers.len() != n_local || self.next_worker >= n_local {
            return Err(Error::BadState {
                reason: format!(
                    "{} worker states (next worker {}) for {} workers",
                    self.workers.len(),
                    self.next_worker,
                    n_local
                ),
            });
        }
        // Workers report their state every `checkpoint_every` items, so a saved state is never
        // followed by that many items to replay: a larger count is damage (a replay that would
        // never end), not progress.
        let every = self.config.get(CHECKPOINT_EVERY_KEY).and_then(|v| v.parse::<u64>().ok());
        for (local, worker) in self.workers.iter().enumerate() {
            if let Some(every) = every.filter(|&e| e > 0)
                && worker.state.is_some()
                && worker.replay >= every
            {
                return Err(Error::BadState {
                    reason: format!(
                        "worker {local} of rank {} is to replay {} items after its saved state, \
                         but the loader saved its state every {every} items",
                        self.rank, worker.replay
                    ),
                });
            }
            if worker.global_worker_id != self.rank * n_local + local {
                return Err(Error::BadState {
                    reason: format!(
                        "worker {local} of rank {} has global id {}",
                        self.rank, worker.global_worker_id
                    ),
                });
            }
        }
        match (self.micro_batch_size, batch_size) {
            (None, None) => Ok(1),
            (Some(old), Some(new)) if new <= old && old % new == 0 => Ok((old / new) as u64),
            (old, new) => Err(Error::ConfigMismatch {
                differences: vec![ConfigDifference {
                    key: format!(
                        "{BATCH_SIZE_KEY} (a micro batch may only shrink to a divisor of the \
                         saved one)"
                    ),
                    checkpoint: Some(format!("{old:?}")),
                    loader: Some(format!("{new:?}")),
                }],
            }),
        }
    }
}

/// How a checkpoint file is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// postcard after a header with a checksum: compact and fast.
    Binary,
    /// Pretty-printed JSON, for humans.
    Json,
}

impl Encoding {
    /// JSON for a path ending in `.json`, binary otherwise.
    pub fn for_path(path: &Path) -> Encoding {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            Encoding::Json
        } else {
            Encoding::Binary
        }
    }
}

/// A checkpoint file: the states of one rank (what one rank saves) or of all ranks (a "global"
/// checkpoint), in rank order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The ranks' states.
    pub ranks: Vec<LoaderState>,
}

/// The header of the binary encoding.
#[derive(Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    body_len: u64,
    body_crc32: u32,
}

/// The JSON encoding: the header's first two fields, then the body.
#[derive(Serialize, Deserialize)]
struct JsonFile {
    format: String,
    version: u32,
    ranks: Vec<LoaderState>,
}

impl Checkpoint {
    /// A checkpoint of one rank.
    pub fn of_rank(state: LoaderState) -> Self {
        Checkpoint { ranks: vec![state] }
    }

    /// The encoded file content.
    pub fn to_bytes(&self, encoding: Encoding) -> Result<Vec<u8>> {
        let internal = |err: &dyn std::fmt::Display| Error::BadState {
            reason: format!("cannot encode the checkpoint: {err}"),
        };
        match encoding {
            Encoding::Binary => {
                let body = postcard::to_stdvec(self).map_err(|e| internal(&e))?;
                let header = Header {
                    format: CHECKPOINT_FORMAT.to_owned(),
                    version: CHECKPOINT_VERSION,
                    body_len: body.len() as u64,
                    body_crc32: crc32(&body),
                };
                let mut res = postcard::to_stdvec(&header).map_err(|e| internal(&e))?;
                res.extend_from_slice(&body);
                Ok(res)
            }
            Encoding::Json => {
                let file = JsonFile {
                    format: CHECKPOINT_FORMAT.to_owned(),
                    version: CHECKPOINT_VERSION,
                    ranks: self.ranks.clone(),
                };
                let mut res = serde_json::to_vec_pretty(&file).map_err(|e| internal(&e))?;
                res.push(b'\n');
                Ok(res)
            }
        }
    }

    /// Decodes a file's content (either encoding); `path` names the file in errors.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        let corrupt = |offset: u64, reason: String| Error::CorruptCheckpoint {
            path: path.to_path_buf(),
            offset,
            reason,
        };
        let first = bytes.iter().position(|b| !b.is_ascii_whitespace());
        if first.is_some_and(|i| bytes[i] == b'{') {
            return from_json(bytes, path);
        }
        if bytes.starts_with(b"PK\x03\x04") {
            // What `torch.save(loader.save_state_rank(), path)` writes: a zip archive.
            return Err(corrupt(
                0,
                "a zip archive, as torch.save writes, not a checkpoint: the checkpoint is the \
                 \"checkpoint\" entry of the saved state (write \
                 torch.load(path)[\"checkpoint\"] to a file)"
                    .to_owned(),
            ));
        }
        let Ok((header, body)) = postcard::take_from_bytes::<Header>(bytes) else {
            return Err(corrupt(
                0,
                "not an energon-rs checkpoint, or its header is cut".to_owned(),
            ));
        };
        if header.format != CHECKPOINT_FORMAT {
            return Err(corrupt(
                0,
                format!("not an energon-rs checkpoint (format {:?})", header.format),
            ));
        }
        check_version(header.version, path)?;
        let offset = (bytes.len() - body.len()) as u64;
        match (body.len() as u64).cmp(&header.body_len) {
            std::cmp::Ordering::Less => {
                return Err(corrupt(
                    bytes.len() as u64,
                    format!(
                        "truncated: the body has {} of its {} bytes",
                        body.len(),
                        header.body_len
                    ),
                ));
            }
            std::cmp::Ordering::Greater => {
                return Err(corrupt(
                    offset + header.body_len,
                    format!(
                        "{} unexpected bytes after the body",
                        body.len() as u64 - header.body_len
                    ),
                ));
            }
            std::cmp::Ordering::Equal => {}
        }
        if crc32(body) != header.body_crc32 {
            return Err(corrupt(
                offset,
                "the body does not match its checksum (altered or damaged)".to_owned(),
            ));
        }
        postcard::from_bytes::<Checkpoint>(body)
            .map_err(|err| corrupt(offset, format!("cannot decode the body: {err}")))
    }

    /// Writes the checkpoint to `path` atomically (a temporary file in the same folder, synced,
    /// then renamed over `path`), in the encoding its extension says ([`Encoding::for_path`]).
    pub fn write(&self, path: &Path) -> Result<()> {
        let bytes = self.to_bytes(Encoding::for_path(path))?;
        write_atomic(path, &bytes).map_err(|source| Error::CheckpointIo {
            action: "write",
            path: path.to_path_buf(),
            source,
        })
    }

    /// Reads a checkpoint file (either encoding).
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = fs::read(path).map_err(|source| Error::CheckpointIo {
            action: "read",
            path: path.to_path_buf(),
            source,
        })?;
        Checkpoint::from_bytes(&bytes, path)
    }

    /// The state of rank `rank`.
    pub fn rank(&self, rank: usize) -> Option<&LoaderState> {
        self.ranks.iter().find(|s| s.rank == rank)
    }

    /// The same loaders spread over `new_world_size` ranks, with the same number of workers in
    /// all (`world_size * num_workers` stays; `energon checkpoint redist`): every worker keeps
    /// its global id (so its slices and seeds) and moves to the rank that has it now.
    ///
    /// `self` must hold every rank of one job, each saved when its next worker was worker 0
    /// (after a multiple of `num_workers` items), so the round robin of the new ranks starts at
    /// their worker 0.
    pub fn redistribute(&self, new_world_size: usize) -> Result<Checkpoint> {
        let bad = |reason: String| Err(Error::BadState { reason });
        let ranks = self.checked_ranks()?;
        let first = ranks[0];
        let total = first.world_size * first.num_workers.max(1);
        if new_world_size == 0 || total % new_world_size != 0 {
            return bad(format!(
                "{total} workers in all ({} ranks x {}) cannot be spread evenly over \
                 {new_world_size} ranks",
                first.world_size,
                first.num_workers.max(1)
            ));
        }
        let mut workers = Vec::with_capacity(total);
        for state in &ranks {
            if state.next_worker != 0 {
                return bad(format!(
                    "rank {} was saved with worker {} next; redistribution needs checkpoints \
                     taken when every rank's next worker is 0 (after a multiple of num_workers \
                     items)",
                    state.rank, state.next_worker
                ));
            }
            workers.extend(state.workers.iter().cloned());
        }
        let per_rank = total / new_world_size;
        let mut res = Vec::with_capacity(new_world_size);
        let mut workers = workers.into_iter();
        for rank in 0..new_world_size {
            let mut config = first.config.clone();
            config.insert(RANK_KEY, rank);
            config.insert(WORLD_SIZE_KEY, new_world_size);
            config.insert(NUM_WORKERS_KEY, per_rank);
            res.push(LoaderState {
                rank,
                world_size: new_world_size,
                num_workers: per_rank,
                next_worker: 0,
                micro_batch_size: first.micro_batch_size,
                workers: workers.by_ref().take(per_rank).collect(),
                config,
                reshaped: None,
            });
        }
        Ok(Checkpoint { ranks: res })
    }
}

fn check_version(version: u32, path: &Path) -> Result<()> {
    if !(OLDEST_CHECKPOINT_VERSION..=CHECKPOINT_VERSION).contains(&version) {
        return Err(Error::IncompatibleCheckpoint {
            path: path.to_path_buf(),
            found: version,
            supported: OLDEST_CHECKPOINT_VERSION..=CHECKPOINT_VERSION,
        });
    }
    Ok(())
}

fn from_json(bytes: &[u8], path: &Path) -> Result<Checkpoint> {
    let corrupt = |err: serde_json::Error| Error::CorruptCheckpoint {
        path: path.to_path_buf(),
        offset: byte_offset(bytes, err.line(), err.column()),
        reason: format!("invalid JSON checkpoint: {err}"),
    };
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(corrupt)?;
    let header_error = |reason: &str| Error::CorruptCheckpoint {
        path: path.to_path_buf(),
        offset: 0,
        reason: reason.to_owned(),
    };
    if value.get("format").and_then(serde_json::Value::as_str) != Some(CHECKPOINT_FORMAT) {
        return Err(header_error("not an energon-rs checkpoint (no \"format\" of one)"));
    }
    let version = value
        .get("version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| header_error("no \"version\" number"))?;
    check_version(u32::try_from(version).unwrap_or(u32::MAX), path)?;
    let file: JsonFile = serde_json::from_slice(bytes).map_err(corrupt)?;
    Ok(Checkpoint { ranks: file.ranks })
}

/// The byte offset of a 1-based line and column.
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> u64 {
    let mut current = 1;
    for (i, &b) in bytes.iter().enumerate() {
        if current == line {
            return (i + column.saturating_sub(1)).min(bytes.len()) as u64;
        }
        if b == b'\n' {
            current += 1;
        }
    }
    bytes.len() as u64
}

/// Writes `bytes` to a temporary file next to `path`, syncs it, and renames it over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path has no file name")
    })?;
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp: PathBuf = dir.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let res = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if res.is_err() {
        // The temporary file is ours; the error that matters is the write's.
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// CRC-32 (IEEE 802.3, as zlib's `crc32`).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests;
