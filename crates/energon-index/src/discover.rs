//! What kind of dataset a path is, which shards a WebDataset folder holds, and how `prepare`
//! assigns them to split parts.
//!
//! Shard discovery matches Energon's `prepare`: Python's `Path.glob("**/*.tar")` plus
//! `Path.glob("**/*.tgz")` under the root, made relative, sorted by path components. Split
//! assignment is either by patterns (`--split-parts name:REGEX`) or by ratio (`--split-ratio`).
//!
//! Patterns are compiled with Rust's `regex` crate, whose syntax is close to Python's `re` for the
//! patterns people write for shard names. Known gaps: no look-around and no backreferences
//! (rejected with an error), no `\Z` (use `\z`), and `$` matches only at the very end (Python's
//! also matches before a final newline, which shard names never contain).

#[cfg(test)]
mod tests;

use std::{
    fs,
    path::{Path, PathBuf},
};

use energon_dist::PyRandom;
use regex::Regex;

use crate::{
    Error, INDEX_SQLITE, INFO_JSON, INFO_YAML, NV_META, Result, split::brace_expand, storage,
    yaml::pynum::py_float,
};

/// The kind of dataset a path holds (Energon's `get_dataset_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetKind {
    /// A `*.jsonl` file (always a crude dataset).
    Jsonl,
    /// A `*.yaml` file: a metadataset.
    Metadataset,
    /// A folder with `.nv-meta/.info.json` or `.nv-meta/.info.yaml`: a prepared WebDataset.
    WebDataset,
    /// A folder with `.nv-meta/index.sqlite` but no info file: an auxiliary media folder.
    Filesystem,
    /// A folder with neither: not a dataset yet (Energon calls it invalid); `prepare` can index it,
    /// loaders must reject it ("did you forget to prepare the dataset?").
    Folder,
}

/// Classifies `path` the way Energon does, in this order: a file ending in `.jsonl` is JSONL, a
/// file ending in `.yaml` a metadataset, any other file is invalid; a folder with an info file is
/// a WebDataset, one with only `index.sqlite` a filesystem dataset, any other folder a
/// [`DatasetKind::Folder`]. Other files and missing paths are [`Error::NotADataset`].
pub fn classify(path: &Path) -> Result<DatasetKind> {
    let invalid =
        |reason: &str| Err(Error::NotADataset { path: path.to_owned(), reason: reason.to_owned() });
    let reach = |e| Error::io("cannot reach", path, e);
    if storage::try_is_file(path).map_err(reach)? {
        let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
        return if name.ends_with(".jsonl") {
            Ok(DatasetKind::Jsonl)
        } else if name.ends_with(".yaml") {
            Ok(DatasetKind::Metadataset)
        } else {
            invalid("a file that is neither .jsonl nor a .yaml metadataset")
        };
    }
    if !storage::try_is_dir(path).map_err(reach)? {
        return invalid("no such file or folder");
    }
    let meta = path.join(NV_META);
    if storage::is_file(&meta.join(INFO_JSON)) || storage::is_file(&meta.join(INFO_YAML)) {
        Ok(DatasetKind::WebDataset)
    } else if storage::is_file(&meta.join(INDEX_SQLITE)) {
        Ok(DatasetKind::Filesystem)
    } else {
        Ok(DatasetKind::Folder)
    }
}

/// Finds the shards under `root`: every `*.tar` and `*.tgz` at any depth, as `/`-separated paths
/// relative to `root`, sorted by path components (Python `PurePosixPath` order, so `a/b.tar` comes
/// before `a-b.tar`).
///
/// Like Python 3.11's `pathlib` glob, hidden folders are searched, symlinked folders are not
/// descended into, and folders that cannot be read are skipped (logged). Unlike it, folders whose
/// name ends in `.tar` are not returned as shards.
pub fn discover_shards(root: &Path) -> Result<Vec<String>> {
    if storage::is_remote(root) {
        return discover_remote_shards(root);
    }
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(root.to_owned(), Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && !rel.is_empty() => {
                tracing::warn!(path = %dir.display(), "skipping unreadable folder");
                continue;
            }
            Err(e) => return Err(Error::io("cannot list", &dir, e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("cannot list", &dir, e))?;
            let name = entry.file_name().into_string().map_err(|raw| Error::NotADataset {
                path: dir.join(&raw),
                reason: "file name is not valid UTF-8".to_owned(),
            })?;
            let file_type =
                entry.file_type().map_err(|e| Error::io("cannot stat", entry.path(), e))?;
            let is_dir = file_type.is_dir()
                || (file_type.is_symlink() && entry.path().metadata().is_ok_and(|m| m.is_dir()));
            let mut child = rel.clone();
            child.push(name.clone());
            if file_type.is_dir() {
                stack.push((entry.path(), child.clone()));
            }
            if !is_dir && (name.ends_with(".tar") || name.ends_with(".tgz")) {
                found.push(child);
            }
        }
    }
    found.sort();
    Ok(found.into_iter().map(|parts| parts.join("/")).collect())
}

/// [`discover_shards`] for an object-store prefix: every object named `*.tar` or `*.tgz` below
/// it, in the same order.
fn discover_remote_shards(root: &Path) -> Result<Vec<String>> {
    let listed = storage::list_files(root).map_err(|e| Error::io("cannot list", root, e))?;
    let mut found: Vec<Vec<String>> = listed
        .into_iter()
        .filter(|o| o.name.ends_with(".tar") || o.name.ends_with(".tgz"))
        .map(|o| o.name.split('/').map(str::to_owned).collect())
        .collect();
    found.sort();
    Ok(found.into_iter().map(|parts| parts.join("/")).collect())
}

/// Drops the shards whose path matches `pattern` anywhere (Python `re.search`), keeping order.
pub fn apply_exclude(shards: &[String], pattern: &str) -> Result<Vec<String>> {
    let re = compile(pattern, "--exclude")?;
    Ok(shards.iter().filter(|s| !re.is_match(s)).cloned().collect())
}

/// Parses one `--split-parts` value `NAME:REGEX` (split at the first `:`).
pub fn parse_split_part(arg: &str) -> Result<(String, String)> {
    arg.split_once(':')
        .map(|(name, pattern)| (name.to_owned(), pattern.to_owned()))
        .ok_or_else(|| Error::Config(format!("--split-parts {arg:?}: expected NAME:REGEX")))
}

/// Assigns shards to split parts by pattern, as `prepare --split-parts` does.
///
/// Each pattern is brace-expanded; a shard belongs to a split part when one of the expanded
/// regexes matches at the start of its path (Python `re.match`, anchored at the start only). A
/// shard may land in several split parts or in none; shard order is kept. A split name given twice
/// keeps its first position and its last pattern (a Python dict).
pub fn split_by_patterns(
    shards: &[String],
    patterns: &[(String, String)],
) -> Result<Vec<(String, Vec<String>)>> {
    let mut res: Vec<(String, Vec<String>)> = Vec::new();
    for (name, pattern) in patterns {
        let mut regexes = Vec::new();
        for alternative in brace_expand(pattern)? {
            regexes.push(compile(&alternative, "--split-parts")?);
        }
        let members: Vec<String> = shards
            .iter()
            .filter(|shard| regexes.iter().any(|re| matches_at_start(re, shard)))
            .cloned()
            .collect();
        match res.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = members,
            None => res.push((name.clone(), members)),
        }
    }
    Ok(res)
}

/// Parses a `--split-ratio` value: exactly three numbers separated by commas, spaces allowed
/// (`"0.8, 0.1, 0.1"`, `"8,1,1"`), each read as Python's `float()`.
///
/// Unlike the reference, which accepts them and then writes odd splits or crashes, negative and
/// non-finite numbers and an all-zero ratio are errors.
pub fn parse_split_ratio(arg: &str) -> Result<[f64; 3]> {
    let bad =
        || Error::Config(format!("invalid split ratio {arg:?}: expected three numbers like 8,1,1"));
    let values: Vec<f64> =
        arg.split(',').map(|x| py_float(x).ok_or_else(bad)).collect::<Result<_>>()?;
    let [train, val, test] = values[..] else { return Err(bad()) };
    let ratio = [train, val, test];
    if ratio.iter().any(|r| !r.is_finite() || *r < 0.0) || ratio.iter().sum::<f64>() <= 0.0 {
        return Err(bad());
    }
    Ok(ratio)
}

/// The split part names of a ratio split, in order.
pub const RATIO_SPLIT_NAMES: [&str; 3] = ["train", "val", "test"];

/// Assigns shards to `train`, `val` and `test` by ratio, as `prepare --split-ratio` does.
///
/// The ratio is normalized by its sum; with `shuffle` the shard list is first shuffled with
/// Python's `random.Random(42).shuffle`. Split `i` then takes the shards from the previous end up
/// to `int(n_shards * cumulative_ratio_i)`, computed in `f64` and truncated exactly as Python does.
/// All three split parts are returned, empty ones included.
pub fn split_by_ratio(
    shards: &[String],
    ratio: [f64; 3],
    shuffle: bool,
) -> Result<Vec<(String, Vec<String>)>> {
    let total: f64 = ratio.iter().sum();
    if ratio.iter().any(|r| !r.is_finite() || *r < 0.0) || total <= 0.0 || !total.is_finite() {
        return Err(Error::Config(format!("invalid split ratio {ratio:?}")));
    }
    let mut order: Vec<String> = shards.to_vec();
    if shuffle {
        PyRandom::new(42).shuffle(&mut order);
    }
    let mut res = Vec::with_capacity(3);
    let mut cumulative = 0.0_f64;
    let mut offset = 0usize;
    for (name, r) in RATIO_SPLIT_NAMES.iter().zip(ratio) {
        cumulative += r / total;
        // COMPAT(energon 7.4): prepare.py:prepare_dataset truncates `len * cumulative`; when the
        // normalized ratios sum to slightly below 1.0 the last shard is dropped from every split.
        let end = truncate_index(order.len() as f64 * cumulative).clamp(offset, order.len());
        res.push(((*name).to_owned(), order[offset..end].to_vec()));
        offset = end;
    }
    Ok(res)
}

/// Python's `int(x)` for a non-negative float that indexes a list.
fn truncate_index(x: f64) -> usize {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        // Saturating float-to-int conversion, then truncation toward zero like Python's int().
        x.trunc() as usize
    }
}

/// Compiles a user regex; `flag` names the option in errors.
fn compile(pattern: &str, flag: &str) -> Result<Regex> {
    Regex::new(pattern)
        .map_err(|e| Error::Config(format!("{flag}: invalid regex {pattern:?}: {e}")))
}

/// Python's `re.match`: a match that starts at the beginning (not necessarily spanning the
/// whole string). The leftmost-first search returns a match at 0 whenever one exists.
fn matches_at_start(re: &Regex, text: &str) -> bool {
    re.find(text).is_some_and(|m| m.start() == 0)
}
