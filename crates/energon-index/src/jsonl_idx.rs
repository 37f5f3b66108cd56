//! The `<file>.jsonl.idx` record offset index of a JSONL dataset.
//!
//! Same format as `.tar.idx` (little-endian `u64`, no header): entry `i` is the byte offset
//! where record `i` starts, the last entry is the file size, and record `i` is the bytes
//! `[idx[i], idx[i+1])` (its newline and any blank lines after it included).
//!
//! The offsets reproduce megatron-energon's `jsonl_prepare.py` exactly (COMPAT(energon 7.4)):
//! lines are split at `\n`; a line that is blank after stripping ASCII whitespace is skipped,
//! except that blank lines before the first record belong to record 0 (which starts at 0);
//! every other line must start with `{` and end with `}` once stripped; an empty file, or one
//! with only blank lines, is an error.

use std::{
    fs::File,
    path::{Path, PathBuf},
};

use crate::{Error, Result, fsutil, tar_idx};

/// The index file of a JSONL file: `.idx` appended (`data.jsonl` → `data.jsonl.idx`, as the
/// reference's `with_suffix(".idx", replace=False)`; the same as `with_suffix(".jsonl.idx")`
/// for every `*.jsonl` file).
pub fn jsonl_idx_path(jsonl: &Path) -> PathBuf {
    let mut res = jsonl.as_os_str().to_owned();
    res.push(".idx");
    PathBuf::from(res)
}

/// Computes the record offsets of the JSONL file at `path` (memory-mapped), ending with the
/// file size.
///
/// Errors: [`Error::Io`] when the file cannot be read; [`Error::BadJsonl`] with the byte offset
/// of the bad line when a line is not a `{...}` object, or when the file has no record.
pub fn build_jsonl_offsets(path: &Path) -> Result<Vec<u64>> {
    if crate::storage::is_remote(path) {
        let bytes = crate::storage::read(path).map_err(|e| Error::io("cannot read", path, e))?;
        return jsonl_offsets(path, &bytes);
    }
    let file = File::open(path).map_err(|e| Error::io("cannot open", path, e))?;
    let len = file.metadata().map_err(|e| Error::io("cannot stat", path, e))?.len();
    if len == 0 {
        return jsonl_offsets(path, &[]);
    }
    // SAFETY: the map is only read, while this function runs. A concurrent truncation of the
    // file (which a dataset being prepared must not see) would raise SIGBUS, not wrong offsets.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("cannot map", path, e))?;
    jsonl_offsets(path, &map)
}

/// Computes the record offsets of JSONL data held in memory; `path` names it in errors.
pub fn jsonl_offsets(path: &Path, data: &[u8]) -> Result<Vec<u64>> {
    let bad = |offset: usize, reason: String| Error::BadJsonl {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    if data.is_empty() {
        return Err(bad(0, "the file is empty".to_owned()));
    }
    let mut res = Vec::new();
    // Where the next record starts (blank lines after a record move it on; leading blank lines
    // do not, so they stay part of record 0).
    let mut next_start = 0usize;
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < data.len() {
        line_no += 1;
        let end = find_newline(&data[start..]).map_or(data.len(), |n| start + n + 1);
        let line = trim_ascii_whitespace(&data[start..end]);
        if line.is_empty() {
            if next_start != 0 {
                next_start = end;
            }
        } else if line.first() == Some(&b'{') && line.last() == Some(&b'}') {
            res.push(next_start as u64);
            next_start = end;
        } else {
            let preview: String = String::from_utf8_lossy(&line[..line.len().min(40)]).into();
            return Err(bad(
                start,
                format!(
                    "line {line_no} is not a JSON object (must start with '{{' and end with '}}'): {preview:?}"
                ),
            ));
        }
        start = end;
    }
    if res.is_empty() {
        return Err(bad(0, "the file holds no JSON record, only blank lines".to_owned()));
    }
    res.push(data.len() as u64);
    Ok(res)
}

/// Writes a JSONL index to `idx_path` atomically (through `<idx_path>.tmp`). When `idx_path`
/// ends in `.idx` and the JSONL file beside it exists, the index gets its permission bits plus
/// owner read and write, as the reference does.
pub fn write_jsonl_idx(idx_path: &Path, offsets: &[u64]) -> Result<()> {
    tar_idx::check_offsets(idx_path, offsets, tar_idx::Check::Write)?;
    let jsonl = idx_path.to_str().and_then(|p| p.strip_suffix(".idx")).map(Path::new);
    fsutil::atomic_write_with_mode(
        idx_path,
        &tar_idx::encode_offsets(offsets),
        jsonl.and_then(fsutil::mode_like),
    )
}

/// A loaded and validated `.jsonl.idx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlIndex {
    path: PathBuf,
    offsets: Vec<u64>,
}

impl JsonlIndex {
    /// Reads the index of the JSONL file `jsonl` (at [`jsonl_idx_path`]) and checks it against
    /// the file: its last entry must equal the file size.
    pub fn open(jsonl: &Path) -> Result<Self> {
        let idx_path = jsonl_idx_path(jsonl);
        let bytes =
            crate::storage::read(&idx_path).map_err(|e| Error::io("cannot read", &idx_path, e))?;
        let data_len =
            crate::storage::size(jsonl).map_err(|e| Error::io("cannot stat", jsonl, e))?;
        Self::from_bytes(&idx_path, &bytes, data_len)
    }

    /// Validates index bytes read elsewhere against a JSONL file of `data_len` bytes; `idx_path`
    /// names the index in errors.
    pub fn from_bytes(idx_path: &Path, bytes: &[u8], data_len: u64) -> Result<Self> {
        let offsets = tar_idx::decode_offsets(idx_path, bytes)?;
        let last = *offsets.last().expect("validated: at least one entry");
        if last != data_len {
            return Err(Error::CorruptIndex {
                path: idx_path.to_path_buf(),
                offset: bytes.len() as u64 - 8,
                reason: format!(
                    "last entry {last} is not the JSONL file size {data_len}; regenerate the \
                     index with `energon prepare`"
                ),
            });
        }
        Ok(JsonlIndex { path: idx_path.to_path_buf(), offsets })
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All entries: the record start offsets, then the file size.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The byte range `[start, end)` of record `i`, or `None` past the end.
    pub fn sample_range(&self, i: usize) -> Option<(u64, u64)> {
        Some((*self.offsets.get(i)?, *self.offsets.get(i.checked_add(1)?)?))
    }
}

/// ASCII whitespace as Python's `bytes.strip()` sees it.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn trim_ascii_whitespace(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s
        && is_space(*first)
    {
        s = rest;
    }
    while let [rest @ .., last] = s
        && is_space(*last)
    {
        s = rest;
    }
    s
}

/// Position of the first `\n`. Scans 32-byte chunks with a branch-free comparison the compiler
/// vectorises, then finds the byte inside the hit chunk.
fn find_newline(hay: &[u8]) -> Option<usize> {
    const CHUNK: usize = 32;
    let mut chunks = hay.chunks_exact(CHUNK);
    let mut base = 0;
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |acc, &b| acc | (b == b'\n')) {
            return chunk.iter().position(|&b| b == b'\n').map(|i| base + i);
        }
        base += CHUNK;
    }
    chunks.remainder().iter().position(|&b| b == b'\n').map(|i| base + i)
}

#[cfg(test)]
mod tests;
