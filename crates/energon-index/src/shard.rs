//! Plain data types describing the samples found in one tar shard.
//!
//! Produced by [`crate::tar_scan`], consumed by [`crate::tar_idx`], [`crate::sqlite`] and
//! [`crate::prepare`].

/// One regular-file member of a sample (a "part").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartEntry {
    /// The part name: everything after the first dot of the member's basename (`jpg`, `seg.png`).
    pub name: String,
    /// Byte offset of the member's content (Python `TarInfo.offset_data`).
    pub offset_data: u64,
    /// Content size in bytes (Python `TarInfo.size`).
    pub size: u64,
}

/// One sample: consecutive members sharing a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleEntry {
    /// The sample key (directory prefix kept, basename up to its first dot).
    pub key: String,
    /// Byte offset of the first header block of the sample's first member (Python
    /// `TarInfo.offset`, which includes GNU long-name and PAX header blocks).
    pub offset: u64,
    /// The parts, in tar order.
    pub parts: Vec<PartEntry>,
}

/// The result of scanning one shard.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardScan {
    /// Samples in tar order.
    pub samples: Vec<SampleEntry>,
    /// Byte offset just past the last member's padded data (Python `TarFile.offset` after
    /// iterating all members): the start of the end-of-archive blocks.
    pub end_offset: u64,
    /// What follows the last member (see [`Trailer`]).
    pub trailer: Trailer,
    /// For a shard in an object store, the version of the object the scan read.
    pub version: Option<crate::storage::ObjectVersion>,
}

/// What follows the last member of a tar shard, from its end offset to the end of the file.
/// Tar readers (Python's `tarfile` too) stop at the end-of-archive marker and accept a file
/// without one, so both cases below lose samples silently: prepare warns and lint reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trailer {
    /// The end-of-archive marker (two zero blocks), and only zeros after it.
    #[default]
    Complete,
    /// No complete end-of-archive marker: the file ends at or within it (a shard cut at a
    /// member boundary looks like this).
    Missing,
    /// Bytes other than zeros after the marker, from this offset (another archive appended: its
    /// members are not indexed).
    DataAfter {
        /// The first such byte's offset.
        offset: u64,
    },
}

impl Trailer {
    /// The trailer of a tar whose members end at `end_offset`, followed by `rest`.
    pub fn of(rest: &[u8], end_offset: u64) -> Trailer {
        const MARKER: usize = 2 * 512;
        match rest.iter().position(|&b| b != 0) {
            Some(i) => Trailer::DataAfter { offset: end_offset + i as u64 },
            None if rest.len() < MARKER => Trailer::Missing,
            None => Trailer::Complete,
        }
    }

    /// What is wrong, for a warning; `None` for a complete trailer.
    pub fn problem(&self) -> Option<String> {
        match self {
            Trailer::Complete => None,
            Trailer::Missing => Some(
                "the shard has no end-of-archive marker: it may have been cut, and samples after \
                 the cut are lost"
                    .to_owned(),
            ),
            Trailer::DataAfter { offset } => Some(format!(
                "the shard has data after its end-of-archive marker, at byte offset {offset} \
                 (another archive appended?); tar readers stop at the marker, so it is not \
                 indexed"
            )),
        }
    }
}

impl ShardScan {
    /// The sample byte ranges as `.tar.idx` stores them: each sample's start, then `end_offset`.
    pub fn offsets(&self) -> Vec<u64> {
        let mut res: Vec<u64> = self.samples.iter().map(|s| s.offset).collect();
        res.push(self.end_offset);
        res
    }

    /// Byte size of sample `i` (up to the next sample's start, or `end_offset` for the last).
    pub fn byte_size(&self, i: usize) -> u64 {
        let end = self.samples.get(i + 1).map_or(self.end_offset, |s| s.offset);
        end - self.samples[i].offset
    }
}
