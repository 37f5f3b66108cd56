//! Checking a whole dataset: index files against `.info.json`, shards against their index files
//! ([`check_shard_rows`]), then every sample of a split part read, decoded and built in parallel
//! (what `energon lint` runs).

use std::{
    collections::BTreeSet,
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
};

use energon_index::{info::read_dataset_info, tar_idx::tar_idx_path};
use rayon::prelude::*;

use crate::{Error, Result, SampleReader, mapped::join_rel};

mod rows;

pub use rows::{ShardProblem, check_shard_rows};

/// A shard whose `.tar.idx` does not hold the sample count `.info.json` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexProblem {
    /// The shard name.
    pub shard: String,
    /// Its count in `.info.json`.
    pub info_count: u64,
    /// What the index says: its sample count, or why it cannot be read.
    pub index_count: std::result::Result<u64, String>,
}

/// Compares every shard's `.tar.idx` length with `.info.json` (the first step of
/// `energon lint`). Errors only when the info itself cannot be read.
pub fn check_index_files(root: &Path) -> Result<Vec<IndexProblem>> {
    let info = read_dataset_info(root)?;
    let mut res = Vec::new();
    for (shard, count) in &info.shard_counts {
        let idx = tar_idx_path(&join_rel(root, shard));
        let index_count = energon_index::tar_idx::count_samples(&idx).map_err(|e| e.to_string());
        if index_count.as_ref() != Ok(count) {
            res.push(IndexProblem { shard: shard.clone(), info_count: *count, index_count });
        }
    }
    Ok(res)
}

/// A sample that could not be read, decoded or built.
#[derive(Debug)]
pub struct SampleProblem {
    /// Its global index in the split part.
    pub index: u64,
    /// What went wrong (with dataset, shard, key and byte offset).
    pub error: Error,
}

/// The result of reading every sample of a split part.
#[derive(Debug, Default)]
pub struct LintReport {
    /// Samples in the split part (excluded ones included).
    pub n_samples: u64,
    /// Samples skipped because the split file excludes them.
    pub n_excluded: u64,
    /// Samples that failed, by index. When a whole shard cannot be read (missing, or a bad
    /// index), only its first failing sample is listed.
    pub problems: Vec<SampleProblem>,
}

/// Reads, decodes and builds every sample of `reader` on `threads` threads (0: one per core).
///
/// `progress` is called with the number of samples done so far, from any thread, about every
/// thousand samples and at the end.
pub fn lint_samples(
    reader: &SampleReader,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<LintReport> {
    const CHUNK: u64 = 256;
    let n = reader.len();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| {
        Error::io("cannot start threads for", reader.dataset().path(), std::io::Error::other(e))
    })?;
    let done = AtomicU64::new(0);
    let excluded = AtomicU64::new(0);
    let mut problems: Vec<SampleProblem> = pool.install(|| {
        (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .flat_map_iter(|chunk| {
                let start = chunk * CHUNK;
                let end = (start + CHUNK).min(n);
                let mut found = Vec::new();
                let mut n_excluded = 0;
                for index in start..end {
                    match reader.read(index) {
                        Ok(Some(_)) => {}
                        Ok(None) => n_excluded += 1,
                        Err(error) => found.push(SampleProblem { index, error }),
                    }
                }
                excluded.fetch_add(n_excluded, Ordering::Relaxed);
                let before = done.fetch_add(end - start, Ordering::Relaxed);
                if (before + end - start) / 1024 != before / 1024 || before + end - start == n {
                    progress(before + end - start);
                }
                found
            })
            .collect()
    });
    problems.sort_by_key(|p| p.index);
    // A shard that cannot be opened fails every one of its samples the same way: keep one.
    let mut broken_shards = BTreeSet::new();
    problems.retain(|p| match (&p.error, p.error.shard()) {
        (
            Error::MissingShard { .. } | Error::IndexMismatch { .. } | Error::ShardChanged { .. },
            Some(shard),
        ) => broken_shards.insert(shard.to_owned()),
        _ => true,
    });
    Ok(LintReport { n_samples: n, n_excluded: excluded.into_inner(), problems })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::ReaderOptions;

    fn fixture_copy() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        energon_tests::copy_dir(&energon_tests::ref_small_dir(), dir.path()).unwrap();
        dir
    }

    #[test]
    fn the_fixture_is_clean() {
        let root = energon_tests::ref_small_dir();
        assert!(check_index_files(&root).unwrap().is_empty());
        assert!(check_shard_rows(&root).unwrap().is_empty());
        let reader = SampleReader::open(&root, &ReaderOptions::default()).unwrap();
        let calls = AtomicU64::new(0);
        let report = lint_samples(&reader, 2, &|_| {
            calls.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!((report.n_samples, report.n_excluded, report.problems.len()), (200, 0, 0));
        assert!(calls.into_inner() >= 1);
    }

    #[test]
    fn changed_shards_are_reported_once_each_naming_the_shard() {
        let dir = fixture_copy();
        let shards = dir.path().join("shards");
        // Shard 0 truncated; shard 1 replaced by shard 2 (other keys); shard 2's rows shifted.
        let bytes = fs::read(shards.join("data-000000.tar")).unwrap();
        fs::write(shards.join("data-000000.tar"), &bytes[..bytes.len() / 2]).unwrap();
        fs::copy(shards.join("data-000002.tar"), shards.join("data-000001.tar")).unwrap();
        let db = dir.path().join(".nv-meta/index.sqlite");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("UPDATE samples SET byte_offset = byte_offset + 512 WHERE tar_file_id = 2 AND sample_index = 7", []).unwrap();
        drop(conn);
        let problems = check_shard_rows(dir.path()).unwrap();
        let shards: Vec<&str> = problems.iter().map(|p| p.shard.as_str()).collect();
        assert_eq!(
            shards,
            ["shards/data-000000.tar", "shards/data-000001.tar", "shards/data-000002.tar"]
        );
        assert!(
            matches!(&problems[0].error, Error::ShardChanged { reason, .. } if reason.contains("bytes but its .tar.idx ends")),
            "{}",
            problems[0].error
        );
        let msg = problems[1].error.to_string();
        assert!(
            msg.contains("data-000001.tar") && msg.contains("expects key \"00000050\""),
            "{msg}"
        );
        let msg = problems[2].error.to_string();
        assert!(
            msg.contains("index.sqlite")
                && msg.contains("data-000002.tar.idx")
                && msg.contains("sample 7"),
            "{msg}"
        );
    }

    #[test]
    fn a_part_row_moved_to_other_bytes_is_reported() {
        let dir = fixture_copy();
        let db = dir.path().join(".nv-meta/index.sqlite");
        let conn = rusqlite::Connection::open(&db).unwrap();
        // Only the part's offset: its sample row still matches the shard.
        let edited = "UPDATE sample_parts SET content_byte_offset = content_byte_offset + 512 \
                      WHERE tar_file_id = 3 AND sample_index = 4 AND part_name = 'txt'";
        assert_eq!(conn.execute(edited, []).unwrap(), 1);
        drop(conn);
        let problems = check_shard_rows(dir.path()).unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].shard, "shards/data-000003.tar");
        let msg = problems[0].error.to_string();
        assert!(msg.contains("index.sqlite gives sample 4") && msg.contains("txt at"), "{msg}");
    }

    #[test]
    fn index_problems_name_the_shard_and_both_counts() {
        let dir = fixture_copy();
        let idx = dir.path().join("shards/data-000001.tar.idx");
        let bytes = fs::read(&idx).unwrap();
        fs::write(&idx, &bytes[..bytes.len() - 16]).unwrap();
        fs::remove_file(dir.path().join("shards/data-000002.tar.idx")).unwrap();
        let problems = check_index_files(dir.path()).unwrap();
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[0].shard, "shards/data-000001.tar");
        assert_eq!((problems[0].info_count, problems[0].index_count.clone()), (50, Ok(48)));
        assert!(problems[1].index_count.is_err());
    }

    #[test]
    fn bad_samples_are_each_reported_once_and_broken_shards_once() {
        let dir = fixture_copy();
        // Damage sample 3's jpg data (not its header): only that sample fails to decode.
        let shard = dir.path().join("shards/data-000000.tar");
        let mut bytes = fs::read(&shard).unwrap();
        for b in &mut bytes[11776..11776 + 600] {
            *b = 0;
        }
        fs::write(&shard, &bytes).unwrap();
        fs::remove_file(dir.path().join("shards/data-000002.tar")).unwrap();
        fs::write(
            dir.path().join(".nv-meta/split.yaml"),
            "split_parts:\n  train:\n  - shards/data-{000000..000003}.tar\nexclude:\n\
             - shards/data-000003.tar/0000015{0..4}\n",
        )
        .unwrap();
        let reader = SampleReader::open(dir.path(), &ReaderOptions::default()).unwrap();
        let report = lint_samples(&reader, 0, &|_| {}).unwrap();
        assert_eq!(report.n_excluded, 5);
        let got: Vec<(u64, Option<&str>)> =
            report.problems.iter().map(|p| (p.index, p.error.shard())).collect();
        assert_eq!(
            got,
            [(3, Some("shards/data-000000.tar")), (100, Some("shards/data-000002.tar"))]
        );
        let at = report.problems[0].error.sample_at().unwrap();
        assert_eq!(at.key.as_deref(), Some("00000003"));
        assert!(matches!(report.problems[1].error, Error::MissingShard { .. }));
    }
}
