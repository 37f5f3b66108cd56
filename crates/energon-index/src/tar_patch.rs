//! Renaming the members of tar shards in place, so that sample keys repeated across shards
//! become unique (`energon prepare --fix-duplicates`): every member of a shard moves into a folder
//! named after the shard (`parts/data-0.tar/000042.jpg`), which makes its sample key
//! `parts/data-0.tar/000042`.
//!
//! Only header blocks change: a member keeps its offset and its data, so the shard keeps its
//! size and layout. A header can take the new name if it fits the header's name fields (ustar:
//! a 155-byte prefix and a 100-byte name split at a `/`; older headers: 100 bytes) and the name
//! is not held elsewhere (GNU long-name members, PAX `path` records): such shards are refused
//! before any shard is touched.
//!
//! COMPAT(energon 7.4.1): flavors/webdataset/tar_patcher.py:TarPatcher.dataset_apply_prefix. One
//! difference: a member whose name already starts with the folder is left alone, so running the
//! fix again after an interruption completes it instead of nesting the folder twice.

use std::{
    fs::{File, OpenOptions},
    os::unix::fs::FileExt,
    path::Path,
};

use crate::{Error, Result, tar_scan::header::parse_numeric};

const BLOCK: u64 = 512;

/// PAX records that hold a member's name, which a header rename cannot change.
const PAX_NAME_KEYS: [&[u8]; 6] =
    [b"path", b"linkpath", b"gnu.path", b"gnu.linkpath", b"SCHILY.path", b"SCHILY.linkpath"];

/// The folder a shard's members move into: its path relative to the dataset root, then `/`.
pub fn shard_prefix(shard: &str) -> String {
    format!("{shard}/")
}

/// Checks that every member of the shard at `path` can be renamed to `prefix` + its name, without
/// changing anything; the error names the shard and the offset of the member that cannot.
pub fn check_prefix(path: &Path, prefix: &str) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::io("cannot open", path, e))?;
    walk(&file, path, prefix.as_bytes(), |_, _| Ok(()))?;
    Ok(())
}

/// Renames every member of the shard at `path` to `prefix` + its name, in place (header blocks
/// only), and syncs the shard; returns how many headers were rewritten. Fails, changing nothing,
/// where [`check_prefix`] fails.
pub fn apply_prefix(path: &Path, prefix: &str) -> Result<u64> {
    check_prefix(path, prefix)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io("cannot open for writing", path, e))?;
    let renamed = walk(&file, path, prefix.as_bytes(), |offset, header| {
        file.write_all_at(header, offset).map_err(|e| Error::io("cannot write", path, e))
    })?;
    file.sync_all().map_err(|e| Error::io("cannot sync", path, e))?;
    Ok(renamed)
}

/// Walks the headers of the shard: for each member that needs the prefix, the renamed header
/// goes to `rename` with its offset. Returns the number of renamed headers.
fn walk(
    file: &File,
    path: &Path,
    prefix: &[u8],
    mut rename: impl FnMut(u64, &[u8; BLOCK as usize]) -> Result<()>,
) -> Result<u64> {
    let len = file.metadata().map_err(|e| Error::io("cannot stat", path, e))?.len();
    let refuse =
        |offset: u64, reason: String| Error::CannotRename { path: path.to_owned(), offset, reason };
    let mut offset = 0u64;
    let mut renamed = 0u64;
    let mut header = [0u8; BLOCK as usize];
    while offset + BLOCK <= len {
        file.read_exact_at(&mut header, offset).map_err(|e| Error::io("cannot read", path, e))?;
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let size = parse_numeric(&header[124..136])
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| refuse(offset, "the member size is not a number".to_owned()))?;
        let data_blocks = size.div_ceil(BLOCK) * BLOCK;
        match header[156] {
            b'L' | b'K' => {
                return Err(refuse(offset, "a GNU long-name member holds the name".to_owned()));
            }
            b'x' | b'g' => {
                let mut data = vec![0u8; usize::try_from(size).unwrap_or(usize::MAX).min(1 << 20)];
                file.read_exact_at(&mut data, offset + BLOCK)
                    .map_err(|_| refuse(offset, "the PAX header is cut short".to_owned()))?;
                if let Some(key) = pax_keys(&data).find(|key| PAX_NAME_KEYS.contains(key)) {
                    let key = String::from_utf8_lossy(key);
                    return Err(refuse(offset, format!("a PAX `{key}` record holds the name")));
                }
            }
            _ => {
                if let Some(new) = renamed_header(&header, prefix).map_err(|r| refuse(offset, r))? {
                    rename(offset, &new)?;
                    renamed += 1;
                }
            }
        }
        offset = offset
            .checked_add(BLOCK + data_blocks)
            .ok_or_else(|| refuse(offset, "the member size runs past any file".to_owned()))?;
    }
    Ok(renamed)
}

/// The keys of the records of PAX header data (`<length> <key>=<value>\n` each).
fn pax_keys(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        let space = rest.iter().position(|&b| b == b' ')?;
        let n: usize = std::str::from_utf8(&rest[..space]).ok()?.parse().ok()?;
        if n <= space || n > rest.len() {
            return None;
        }
        let (record, tail) = rest.split_at(n);
        rest = tail;
        let body = &record[space + 1..];
        let eq = body.iter().position(|&b| b == b'=')?;
        Some(&body[..eq])
    })
}

/// The header with `prefix` before its name, `None` if the name already starts with it, or why
/// the new name does not fit the header.
fn renamed_header(
    header: &[u8; BLOCK as usize],
    prefix: &[u8],
) -> std::result::Result<Option<[u8; BLOCK as usize]>, String> {
    let ustar = &header[257..262] == b"ustar" && matches!(header[262], 0 | b' ');
    let name = until_nul(&header[..100]);
    let old_prefix = if ustar { until_nul(&header[345..500]) } else { &[] };
    let mut full = Vec::with_capacity(old_prefix.len() + 1 + name.len());
    full.extend_from_slice(old_prefix);
    if !old_prefix.is_empty() && !name.is_empty() {
        full.push(b'/');
    }
    full.extend_from_slice(name);
    if full.starts_with(prefix) {
        return Ok(None);
    }
    let mut new_name = prefix.to_vec();
    new_name.extend_from_slice(&full);
    let (new_prefix, new_name) = if new_name.len() <= 100 {
        (&[][..], &new_name[..])
    } else if ustar {
        // The last `/` that leaves at most 155 bytes before it; the rest must fit 100 bytes.
        let cut = new_name.iter().enumerate().rfind(|&(i, &b)| b == b'/' && i <= 155);
        match cut {
            Some((i, _)) if new_name.len() - i - 1 <= 100 => (&new_name[..i], &new_name[i + 1..]),
            _ => return Err(format!("{} bytes do not fit a ustar header", new_name.len())),
        }
    } else {
        return Err(format!("{} bytes do not fit a pre-ustar header (100)", new_name.len()));
    };
    let mut out = *header;
    out[..100].fill(0);
    out[..new_name.len()].copy_from_slice(new_name);
    if ustar {
        out[345..500].fill(0);
        out[345..345 + new_prefix.len()].copy_from_slice(new_prefix);
    }
    // The checksum counts its own field as spaces; written as six octal digits, NUL, space.
    out[148..156].fill(b' ');
    let sum: u32 = out.iter().map(|&b| u32::from(b)).sum();
    out[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    Ok(Some(out))
}

fn until_nul(field: &[u8]) -> &[u8] {
    field.iter().position(|&b| b == 0).map_or(field, |n| &field[..n])
}

#[cfg(test)]
mod tests;
