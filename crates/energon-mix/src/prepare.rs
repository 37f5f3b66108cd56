//! `energon prepare <metadataset.yaml>`: builds the join indexes every split needs.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use energon_index::join_index::JoinSummary;

use crate::{
    error::Result,
    join::{JoinStatus, cache_dir, prepare_join},
    resolve::{LeafKind, Metadataset, ResolveOptions},
};

/// One join index of a prepared metadataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedJoin {
    /// The split of the root metadataset that reads it.
    pub split: String,
    /// The join index file.
    pub path: PathBuf,
    /// Whether it was built now or existed.
    pub status: JoinStatus,
}

/// What [`prepare_metadataset`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrepareReport {
    /// The join indexes, in split and tree order (an index read by several splits once).
    pub joins: Vec<PreparedJoin>,
    /// Stale join indexes removed from the metadataset's cache folder.
    pub removed: Vec<PathBuf>,
}

impl PrepareReport {
    /// The report as the lines `energon prepare` prints (the reference's messages).
    pub fn lines(&self) -> Vec<String> {
        let mut res = Vec::new();
        for join in &self.joins {
            match &join.status {
                JoinStatus::UpToDate => res.push(format!(
                    "Joined dataset already prepared at {} and up-to-date",
                    join.path.display()
                )),
                JoinStatus::Built(summary) => {
                    res.push(format!("Preparing joined dataset in {}", join.path.display()));
                    res.extend(summary_lines(summary));
                }
            }
        }
        for path in &self.removed {
            res.push(format!("Cleanup cache file {}", path.display()));
        }
        if self.joins.is_empty() {
            res.push("Nothing to prepare: the metadataset has no joins".to_owned());
        }
        res
    }
}

fn summary_lines(summary: &JoinSummary) -> Vec<String> {
    let mut res = Vec::new();
    if summary.n_rows == summary.n_primary {
        res.push(format!("Joined all {} samples", summary.n_rows));
    } else {
        res.push(format!(
            "Joined {}/{} samples, skipped {} samples due to join",
            summary.n_rows,
            summary.n_primary,
            summary.n_primary - summary.n_rows
        ));
    }
    if summary.n_missing.iter().any(|&n| n > 0) {
        res.push(format!(
            "Non-matching samples filled with None for each dataset: {:?}",
            summary.n_missing
        ));
    }
    res
}

/// Prepares the metadataset at `path`: builds the join index of every join reachable from any
/// of its splits (through nested files too) that does not exist yet, in the cache folder of the
/// file holding the join, and removes stale join indexes from the root file's cache folder.
///
/// The joins are found by resolving each split as the loader does, so the indexes built are
/// exactly the ones the loader looks for (the split part a join reads included).
pub fn prepare_metadataset(path: &Path) -> Result<PrepareReport> {
    let mds = Metadataset::load(path)?;
    let mut report = PrepareReport::default();
    let mut produced = BTreeSet::new();
    let splits: Vec<String> = mds.split_names().map(str::to_owned).collect();
    for split in splits {
        let resolved = mds.resolve(&split, &ResolveOptions::default())?;
        for leaf in &resolved.leaves {
            let LeafKind::Joined(spec) = &leaf.kind else { continue };
            let (path, status) = prepare_join(spec)?;
            if produced.insert(path.clone()) {
                report.joins.push(PreparedJoin { split: split.clone(), path, status });
            }
        }
    }
    let cache = cache_dir(mds.path());
    if let Ok(entries) = fs::read_dir(&cache) {
        let mut stale: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
                name.starts_with("join_index_")
                    && (name.ends_with(".bin") || name.ends_with(".bin.tmp"))
                    && !produced.contains(p)
            })
            .collect();
        stale.sort();
        for path in stale {
            fs::remove_file(&path)
                .map_err(|e| energon_index::Error::io("cannot remove", &path, e))?;
            report.removed.push(path);
        }
    }
    Ok(report)
}
