//! The `<shard>.tar.idx` sample offset index next to each tar shard.
//!
//! Format (megatron-energon `itar.py`): a flat array of little-endian `u64`, no header. Entry
//! `i` is the byte offset of sample `i`'s first member header (including its long-name and PAX
//! header blocks); the last entry is the offset just past the last member's data, where the
//! end-of-archive blocks start. `n_samples + 1` entries in all; sample `i` occupies the bytes
//! `[idx[i], idx[i+1])`.
//!
//! Sample 0: the reference's reader takes its start as byte 0 whatever `idx[0]` says
//! (COMPAT(energon 7.4): `itar.py`, `get_itar_byte_offset`). [`TarIndex::sample_range`] returns
//! the stored `idx[0]` instead. Both ranges yield the same sample, since members before the
//! first sample (directories, `__meta__` files) are skipped by every reader, and the stored
//! value makes the range exact.

use std::path::{Path, PathBuf};

use crate::{Error, Result, fsutil};

/// The index file of a shard: its last suffix replaced by `.tar.idx` (Python
/// `PurePath.with_suffix`): `x.tar` → `x.tar.idx`, `x.tgz` → `x.tar.idx`, `x` → `x.tar.idx`.
pub fn tar_idx_path(shard: &Path) -> PathBuf {
    with_python_suffix(shard, ".tar.idx")
}

/// Writes the index of `shard` (to [`tar_idx_path`]`(shard)`), atomically through
/// `<name>.tar.idx.tmp`, with the shard's permission bits plus owner read and write.
///
/// `offsets` must be what [`TarIndex::open`] accepts (at least one entry, non-decreasing), else
/// [`Error::CorruptIndex`] naming the entry's byte offset in the index, and nothing is written.
pub fn write_tar_idx(shard: &Path, offsets: &[u64]) -> Result<()> {
    let path = tar_idx_path(shard);
    check_offsets(&path, offsets, Check::Write)?;
    fsutil::atomic_write_with_mode(&path, &encode_offsets(offsets), fsutil::mode_like(shard))
}

/// The bytes of an offset index (`.tar.idx`, `.jsonl.idx`): little-endian `u64`s.
pub fn encode_offsets(offsets: &[u64]) -> Vec<u8> {
    offsets.iter().flat_map(|o| o.to_le_bytes()).collect()
}

/// A loaded and validated `.tar.idx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TarIndex {
    path: PathBuf,
    offsets: Vec<u64>,
}

impl TarIndex {
    /// Reads and validates the index file at `path` (the `.tar.idx` itself, see
    /// [`tar_idx_path`]).
    pub fn open(path: &Path) -> Result<Self> {
        let bytes = crate::storage::read(path).map_err(|e| Error::io("cannot read", path, e))?;
        Self::from_bytes(path, &bytes)
    }

    /// Validates index bytes read elsewhere; `path` names the index in errors.
    ///
    /// The length must be a non-zero multiple of 8 and the offsets non-decreasing, else
    /// [`Error::CorruptIndex`] with the byte offset inside the index.
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        Ok(TarIndex { path: path.to_path_buf(), offsets: decode_offsets(path, bytes)? })
    }

    /// The index file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of samples (entries minus one).
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the shard has no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All entries: the sample start offsets, then the end offset.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The end offset (the last entry): where the last sample ends.
    pub fn end_offset(&self) -> u64 {
        // Validated on construction: there is at least one entry.
        self.offsets.last().copied().unwrap_or(0)
    }

    /// The byte range `[start, end)` of sample `i` in the shard, or `None` past the end.
    /// Sample 0 starts at the stored `idx[0]` (see the module docs).
    pub fn sample_range(&self, i: usize) -> Option<(u64, u64)> {
        Some((*self.offsets.get(i)?, *self.offsets.get(i.checked_add(1)?)?))
    }

    /// Checks that the index fits a shard of `shard_len` bytes (its end offset is not past the
    /// end of the shard), as a stale index after a shard was replaced would not.
    pub fn check_shard_len(&self, shard_len: u64) -> Result<()> {
        let end = self.end_offset();
        if end > shard_len {
            return Err(Error::CorruptIndex {
                path: self.path.clone(),
                offset: 8 * self.len() as u64,
                reason: format!(
                    "end offset {end} is past the end of the shard ({shard_len} bytes); \
                     regenerate the index with `energon prepare`"
                ),
            });
        }
        Ok(())
    }
}

/// The number of samples an index file holds, from its size alone (what `energon lint`
/// compares with `.info.json`).
pub fn count_samples(path: &Path) -> Result<u64> {
    let len = crate::storage::size(path).map_err(|e| Error::io("cannot stat", path, e))?;
    check_len(path, len, Check::Read)?;
    Ok(len / 8 - 1)
}

/// Decodes and validates an offset index (shared with `.jsonl.idx`).
pub(crate) fn decode_offsets(path: &Path, bytes: &[u8]) -> Result<Vec<u64>> {
    check_len(path, bytes.len() as u64, Check::Read)?;
    let offsets: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8 bytes")))
        .collect();
    check_offsets(path, &offsets, Check::Read)?;
    Ok(offsets)
}

/// Whether an offset index is checked as read (it should be regenerated) or before writing it
/// (it is not written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    Read,
    Write,
}

impl Check {
    fn advice(self) -> &'static str {
        match self {
            Check::Read => "regenerate the index with `energon prepare`",
            Check::Write => "the index was not written",
        }
    }
}

/// The checks of a decoded index, also made before writing one (shared with `.jsonl.idx`): at
/// least one entry, offsets non-decreasing.
pub(crate) fn check_offsets(path: &Path, offsets: &[u64], check: Check) -> Result<()> {
    check_len(path, 8 * offsets.len() as u64, check)?;
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::CorruptIndex {
            path: path.to_path_buf(),
            offset: 8 * (i as u64 + 1),
            reason: format!(
                "offsets decrease ({} after {}); {}",
                offsets[i + 1],
                offsets[i],
                check.advice()
            ),
        });
    }
    Ok(())
}

fn check_len(path: &Path, len: u64, check: Check) -> Result<()> {
    if len == 0 || !len.is_multiple_of(8) {
        return Err(Error::CorruptIndex {
            path: path.to_path_buf(),
            offset: len - len % 8,
            reason: format!("size {len} is not a non-zero multiple of 8 bytes; {}", check.advice()),
        });
    }
    Ok(())
}

/// Python `PurePath.with_suffix(suffix)`: replaces the final component's suffix (from its last
/// dot, unless that dot starts or ends the name) or appends `suffix` when there is none.
///
/// `suffix` starts with a dot.
pub(crate) fn with_python_suffix(path: &Path, suffix: &str) -> PathBuf {
    let ends_with_dot = path.file_name().is_some_and(|n| n.as_encoded_bytes().ends_with(b"."));
    if path.file_name().is_none() || ends_with_dot {
        // Python sees no suffix in `a.`; Rust's extension logic would drop the dot.
        let mut res = path.as_os_str().to_owned();
        res.push(suffix);
        return PathBuf::from(res);
    }
    // Elsewhere Rust's extension is Python's suffix without its dot.
    path.with_extension(&suffix[1..])
}

#[cfg(test)]
mod tests;
