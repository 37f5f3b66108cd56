//! The indexing pass of a prepare: every shard scanned (its `.tar.idx` written or checked) by
//! parallel workers, and its rows added to `index.sqlite` by one writer, in shard order.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    sync::{
        Condvar, Mutex, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
        mpsc,
    },
};

use super::Progress;
use crate::{Error, Result, fsutil, shard::ShardScan, sqlite, storage, tar_idx, tar_scan};

#[derive(Debug, Default)]
pub(super) struct Scanned {
    pub(super) shard_counts: Vec<u64>,
    pub(super) part_names: Vec<String>,
    pub(super) first_keys: Vec<String>,
    /// The shards whose tar trailer loses samples (see [`crate::Trailer`]), in order.
    pub(super) trailers: Vec<(String, crate::Trailer)>,
    /// The versions of the shards read from an object store, by name.
    pub(super) versions: BTreeMap<String, storage::ObjectVersion>,
}

/// The `.tar.idx` files of an indexing pass: written (their temporary names), or only checked.
pub(super) enum IdxFiles {
    Write(Vec<PathBuf>),
    Check(Vec<PathBuf>),
}

/// What [`index_shards`] works on.
pub(super) struct IndexJob<'a> {
    pub(super) db_path: &'a Path,
    pub(super) db_tmp: &'a Path,
    pub(super) shards: &'a [String],
    pub(super) paths: &'a [PathBuf],
    pub(super) idx_files: &'a IdxFiles,
    pub(super) num_workers: usize,
    pub(super) sample_tables: bool,
}

pub(super) fn index_shards(
    job: &IndexJob<'_>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Scanned> {
    let IndexJob { db_path, db_tmp, shards, paths, .. } = *job;
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
    let mut writer = if job.sample_tables {
        sqlite::SqliteIndexWriter::create(db_tmp)?
    } else {
        sqlite::SqliteIndexWriter::create_without_sample_tables(db_tmp)?
    };
    if storage::is_file(db_path) {
        let local =
            storage::local_file(db_path).map_err(|e| Error::io("cannot read", db_path, e))?;
        writer.copy_media_tables_from(&local)?;
    }
    let n_workers = job.num_workers.clamp(1, paths.len());
    let mut scanned = Scanned { shard_counts: vec![0; paths.len()], ..Scanned::default() };
    // Workers take shards in order from a shared counter and stream their scans to this thread,
    // the single SQLite writer. The writer adds the shards in shard order, so that every index
    // of the tables grows at its end and the row order does not depend on thread timing; it
    // holds back the scans that arrive early. A worker only starts a shard within a window of
    // the next one to write, so that a slow shard (or a worker the system does not schedule for
    // a while) cannot make the others run ahead: the scans held at any time are bounded by the
    // window, whatever the number of shards.
    let window = 2 * n_workers;
    let turns = Turns::default();
    let (tx, rx) = mpsc::sync_channel::<(usize, ScannedShard)>(window);
    std::thread::scope(|scope| -> Result<()> {
        let mut workers = Vec::with_capacity(n_workers);
        for _ in 0..n_workers {
            let tx = tx.clone();
            let turns = &turns;
            workers.push(scope.spawn(move || -> Result<(), (usize, Error)> {
                loop {
                    let i = turns.next_shard.fetch_add(1, Ordering::Relaxed);
                    if i >= paths.len() || !turns.wait_for_window(i, window) {
                        return Ok(());
                    }
                    let scan = match scan_one(&paths[i], job.idx_files, i, job.sample_tables) {
                        Ok(scan) => scan,
                        Err(err) => {
                            turns.cancel();
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
        let mut early = BTreeMap::new();
        let mut next_write = 0;
        'recv: for (i, scan) in rx.iter() {
            progress(Progress::Shard { n_samples: scan.n_samples, n_bytes: shard_bytes[i] });
            early.insert(i, scan);
            while let Some(scan) = early.remove(&next_write) {
                write_res = record_shard(&mut writer, &mut scanned, next_write, shards, &scan);
                if write_res.is_err() {
                    turns.cancel();
                    break 'recv;
                }
                next_write += 1;
                turns.written(next_write);
            }
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

/// The workers' and the writer's shared progress: which shard is taken next, how many are
/// written, and whether the pass was cancelled (a failure on either side).
#[derive(Default)]
struct Turns {
    next_shard: AtomicUsize,
    written: Mutex<usize>,
    advanced: Condvar,
    cancelled: AtomicBool,
}

impl Turns {
    /// Waits until shard `i` is within `window` of the next shard to write; false when the
    /// pass was cancelled.
    fn wait_for_window(&self, i: usize, window: usize) -> bool {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        while i >= *written + window && !self.cancelled.load(Ordering::Relaxed) {
            written = self.advanced.wait(written).unwrap_or_else(PoisonError::into_inner);
        }
        !self.cancelled.load(Ordering::Relaxed)
    }

    /// The writer has written the first `n` shards.
    fn written(&self, n: usize) {
        *self.written.lock().unwrap_or_else(PoisonError::into_inner) = n;
        self.advanced.notify_all();
    }

    /// Stops the pass: workers take no further shards, waiting ones return.
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
        // Under the lock, so that a worker between its check and its wait does not miss it.
        let _written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        self.advanced.notify_all();
    }
}

/// What a worker sends for one shard.
struct ScannedShard {
    /// The scan; without sample tables, only its first samples.
    scan: ShardScan,
    n_samples: u64,
    /// Up to [`MAX_PART_NAMES`] distinct part names of the shard, in order of first appearance.
    part_names: Vec<String>,
}

/// How many distinct part names the summary lists.
const MAX_PART_NAMES: usize = 50;

fn record_shard(
    writer: &mut sqlite::SqliteIndexWriter,
    scanned: &mut Scanned,
    i: usize,
    shards: &[String],
    shard: &ScannedShard,
) -> Result<()> {
    if writer.has_sample_tables() {
        writer.add_shard(i as u64, &shards[i], &shard.scan)?;
    }
    scanned.shard_counts[i] = shard.n_samples;
    if shard.scan.trailer != crate::Trailer::Complete {
        scanned.trailers.push((shards[i].clone(), shard.scan.trailer));
    }
    if let Some(version) = &shard.scan.version {
        scanned.versions.insert(shards[i].clone(), version.clone());
    }
    if i == 0 {
        scanned.first_keys = shard.scan.samples.iter().take(2).map(|s| s.key.clone()).collect();
    }
    // Shards come in order, so this keeps the order of first appearance over the dataset.
    for name in &shard.part_names {
        if scanned.part_names.len() >= MAX_PART_NAMES {
            break;
        }
        if !scanned.part_names.contains(name) {
            scanned.part_names.push(name.clone());
        }
    }
    Ok(())
}

/// Scans shard `i` and writes its `.tar.idx` (or checks it against the existing one). Without
/// sample tables, only the first samples' keys and the part names of a shard are kept.
fn scan_one(
    path: &Path,
    idx_files: &IdxFiles,
    i: usize,
    sample_tables: bool,
) -> Result<ScannedShard> {
    // `scan_shard` reports a shard without samples as `EmptyShard`.
    let mut scan = tar_scan::scan_shard(path)?;
    let offsets = scan.offsets();
    match idx_files {
        IdxFiles::Write(tmps) => {
            let idx_tmp = &tmps[i];
            tar_idx::check_offsets(idx_tmp, &offsets, tar_idx::Check::Write)?;
            fsutil::write_unsynced(
                idx_tmp,
                &tar_idx::encode_offsets(&offsets),
                fsutil::mode_like(path),
            )?;
        }
        IdxFiles::Check(idx_paths) => check_idx(path, &idx_paths[i], &offsets)?,
    }
    let mut part_names: Vec<String> = Vec::new();
    for part in scan.samples.iter().flat_map(|s| &s.parts) {
        if part_names.len() >= MAX_PART_NAMES {
            break;
        }
        if !part_names.contains(&part.name) {
            part_names.push(part.name.clone());
        }
    }
    let n_samples = scan.samples.len() as u64;
    if !sample_tables {
        // Only the first keys of the first shard are reported.
        scan.samples.truncate(2);
    }
    Ok(ScannedShard { scan, n_samples, part_names })
}

/// With `--sample-tables-only`: the shard must still have the sample offsets of its `.tar.idx`.
fn check_idx(shard: &Path, idx_path: &Path, offsets: &[u64]) -> Result<()> {
    let idx = tar_idx::TarIndex::open(idx_path)?;
    if idx.offsets() == offsets {
        return Ok(());
    }
    let reason = match idx.offsets().iter().zip(offsets).position(|(a, b)| a != b) {
        Some(j) => format!(
            "sample {j} starts at byte {} in the index but at byte {} in the shard",
            idx.offsets()[j],
            offsets[j]
        ),
        None => format!("the index has {} samples, the shard {}", idx.len(), offsets.len() - 1),
    };
    Err(Error::Inconsistent { first: idx_path.to_owned(), second: shard.to_owned(), reason })
}

#[cfg(test)]
mod tests {
    use std::{thread, time::Duration};

    use super::*;
    use crate::{
        INDEX_SQLITE, NV_META,
        prepare::{PrepareOptions, prepare_dataset},
        sqlite::dump_canonical,
        testutil::write_text_shard,
    };

    #[test]
    fn a_worker_waits_for_the_window_and_is_released_by_writes_or_cancel() {
        let turns = Turns::default();
        thread::scope(|scope| {
            // Shard 4 with a window of 2 waits until shards 0..3 are written.
            let waiter = scope.spawn(|| turns.wait_for_window(4, 2));
            thread::sleep(Duration::from_millis(20));
            turns.written(2);
            thread::sleep(Duration::from_millis(20));
            assert!(!waiter.is_finished(), "shard 4 is not within 2 of shard 2");
            turns.written(3);
            assert!(waiter.join().unwrap());
        });
        assert!(turns.wait_for_window(3, 2), "within the window: no wait");
        thread::scope(|scope| {
            let waiter = scope.spawn(|| turns.wait_for_window(100, 2));
            thread::sleep(Duration::from_millis(20));
            turns.cancel();
            assert!(!waiter.join().unwrap(), "a cancelled pass releases the waiting workers");
        });
    }

    #[test]
    fn many_shards_over_a_few_workers_index_as_one_worker_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..40 {
            let keys: Vec<String> = (0..1 + i % 5).map(|k| format!("s{i:02}-{k}")).collect();
            write_text_shard(root, i, &keys);
        }
        let db = root.join(NV_META).join(INDEX_SQLITE);
        let mut dumps = Vec::new();
        for n in [1, 3, 16] {
            let summary =
                prepare_dataset(root, &PrepareOptions::default().num_workers(n), &|_| {}).unwrap();
            assert_eq!(summary.shard_counts.len(), 40);
            dumps.push(dump_canonical(&db).unwrap());
        }
        assert_eq!(dumps[0], dumps[1]);
        assert_eq!(dumps[0], dumps[2]);
    }

    #[test]
    fn a_failing_shard_ends_the_pass_with_workers_waiting_for_the_window() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..30 {
            write_text_shard(root, i, &[format!("k{i:02}")]);
        }
        // Shard 0 is damaged: the others run ahead up to the window and wait there.
        fs::write(root.join("parts/data-0.tar"), vec![7u8; 1024]).unwrap();
        let err =
            prepare_dataset(root, &PrepareOptions::default().num_workers(2), &|_| {}).unwrap_err();
        assert!(err.to_string().contains("data-0.tar"), "{err}");
    }
}
