//! Tar shard scanning: walk the headers of a shard and group its members into samples.
//!
//! [`scan_shard`] memory-maps a shard and returns its [`ShardScan`]: every sample's key, start
//! offset and parts (the rows of `.tar.idx` and `index.sqlite`), byte-identical to what
//! megatron-energon's `prepare` computes with Python's `tarfile`. The layers below it are public
//! for the reader:
//!
//! - [`members`] walks the members of any tar byte range (a whole shard, or one sample range
//!   `[idx[i], idx[i+1])` of an mmap) and reports Python's `offset`, `offset_data` and `size`.
//! - [`split_key_part`] and [`is_skipped`] map a member name to a sample key and part name.
//!
//! Unlike Python, which takes a damaged header in the middle of a shard for the end of the
//! archive, every damage is an error naming the byte offset.

pub(crate) mod header;
mod names;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::{fs::File, path::Path};

pub use header::{MemberKind, Members, PaxGlobals, TarError, TarMember, members};
pub use names::{is_skipped, split_key_part};

use crate::{
    Error, Result,
    shard::{PartEntry, SampleEntry, ShardScan},
};

/// Scans the tar shard at `path` (memory-mapped) into its samples.
///
/// Errors: [`Error::Io`] when the file cannot be read, [`Error::CompressedTar`] for a gzip file,
/// [`Error::CorruptTar`] for damaged or truncated tar data, [`Error::EmptyShard`] for an empty
/// file or a shard without samples.
pub fn scan_shard(path: &Path) -> Result<ShardScan> {
    if crate::storage::is_remote(path) {
        // One streaming read of the whole object; the scan needs every header.
        let (bytes, version) =
            crate::storage::read_versioned(path).map_err(|e| Error::io("cannot read", path, e))?;
        if bytes.is_empty() {
            return Err(Error::EmptyShard { path: path.to_path_buf() });
        }
        let mut scan = scan_bytes(path, &bytes)?;
        scan.version = version;
        return Ok(scan);
    }
    let file = File::open(path).map_err(|e| Error::io("cannot open", path, e))?;
    let len = file.metadata().map_err(|e| Error::io("cannot stat", path, e))?.len();
    if len == 0 {
        return Err(Error::EmptyShard { path: path.to_path_buf() });
    }
    // SAFETY: the map is only read, and lives for the duration of the scan. Like every reader
    // of a memory-mapped file we rely on nobody truncating or rewriting the shard meanwhile
    // (a dataset being prepared must not be written to); a concurrent truncation would raise
    // SIGBUS, not produce wrong offsets silently.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io("cannot map", path, e))?;
    scan_bytes(path, &map)
}

/// Scans tar data held in memory; `path` only names the shard in errors.
///
/// Same results and errors as [`scan_shard`].
pub fn scan_bytes(path: &Path, data: &[u8]) -> Result<ShardScan> {
    let mut res = ShardScan::default();
    let mut walk = members(data, 0);
    for member in &mut walk {
        let member = member.map_err(|err| classify_error(path, data, err))?;
        if !member.is_regular() || is_skipped(&member.name) {
            continue;
        }
        let Some((key, part)) = split_key_part(&member.name) else {
            continue;
        };
        if member.name_is_lossy {
            return Err(Error::CorruptTar {
                path: path.to_path_buf(),
                offset: member.offset,
                reason: format!(
                    "member name {:?} is not valid UTF-8 (sample keys must be UTF-8)",
                    member.name
                ),
            });
        }
        let part =
            PartEntry { name: part.to_owned(), offset_data: member.offset_data, size: member.size };
        match res.samples.last_mut() {
            // COMPAT(energon 7.4): prepare.py:_preprocess_tar — only a change of key starts a
            // new sample, so a key that comes back later is a second sample with the same key.
            Some(last) if last.key == key => last.parts.push(part),
            _ => res.samples.push(SampleEntry {
                key: key.to_owned(),
                offset: member.offset,
                parts: vec![part],
            }),
        }
    }
    res.end_offset = walk.position();
    let end = usize::try_from(res.end_offset).unwrap_or(usize::MAX).min(data.len());
    res.trailer = crate::shard::Trailer::of(&data[end..], res.end_offset);
    if res.samples.is_empty() {
        return Err(Error::EmptyShard { path: path.to_path_buf() });
    }
    Ok(res)
}

/// Maps a walk error to the crate error, recognising compressed files at offset 0.
fn classify_error(path: &Path, data: &[u8], err: TarError) -> Error {
    if err.offset == 0 {
        if data.starts_with(&[0x1f, 0x8b]) {
            return Error::CompressedTar { path: path.to_path_buf() };
        }
        let other = if data.starts_with(b"BZh") {
            Some("bzip2")
        } else if data.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some("xz")
        } else if data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some("zstd")
        } else {
            None
        };
        if let Some(format) = other {
            let reason = format!("{} (the file looks {format}-compressed)", err.reason);
            return TarError { reason, ..err }.into_error(path);
        }
    }
    err.into_error(path)
}
