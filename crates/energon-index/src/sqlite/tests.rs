//! Tests of `index.sqlite` and `index.uuid`: golden comparisons with the reference's fixture,
//! lookups, legacy layouts, duplicate keys, media tables and the UUID file.

mod golden;
mod legacy;
mod lookups;
mod media;
mod uuid_file;
mod writer;

use std::path::{Path, PathBuf};

use super::{SqliteIndexWriter, schema::readonly_uri};
use crate::shard::{PartEntry, SampleEntry, ShardScan};

/// The reference-prepared fixtures folder, beside the repository.
fn fixtures_dir() -> PathBuf {
    energon_fixtures::fixtures_dir()
}

/// The reference-prepared WebDataset.
fn ref_small() -> PathBuf {
    fixtures_dir().join("energon-ref-small")
}

/// The reference's `index.sqlite`.
fn ref_db() -> PathBuf {
    ref_small().join(".nv-meta/index.sqlite")
}

/// A shard laid out like a tar file: every member takes a 512-byte header and one 512-byte data
/// block, and its content size is 100 + the member's position.
fn scan_of(samples: &[(&str, &[&str])]) -> ShardScan {
    let mut cursor = 0;
    let mut res = ShardScan::default();
    for (key, parts) in samples {
        let mut sample = SampleEntry { key: (*key).to_owned(), offset: cursor, parts: Vec::new() };
        for name in *parts {
            sample.parts.push(PartEntry {
                name: (*name).to_owned(),
                offset_data: cursor + 512,
                size: 100 + cursor / 1024,
            });
            cursor += 1024;
        }
        res.samples.push(sample);
    }
    res.end_offset = cursor;
    res
}

/// `n` samples `<prefix><i>` with parts `jpg`, `txt`, `json`.
fn numbered_scan(prefix: &str, n: usize) -> ShardScan {
    let keys: Vec<String> = (0..n).map(|i| format!("{prefix}{i:06}")).collect();
    let samples: Vec<(&str, &[&str])> =
        keys.iter().map(|k| (k.as_str(), &["jpg", "txt", "json"][..])).collect();
    scan_of(&samples)
}

/// Writes the shards (ids 0, 1, ... in order) into a new index at `path`.
fn write_db(path: &Path, shards: &[(&str, &ShardScan)]) -> crate::Result<()> {
    let mut writer = SqliteIndexWriter::create(path)?;
    for (i, (name, scan)) in shards.iter().enumerate() {
        writer.add_shard(i as u64, name, scan)?;
    }
    writer.finish()
}

#[test]
fn uris_escape_everything_but_plain_path_characters() {
    assert_eq!(
        readonly_uri(Path::new("/data/x.sqlite"), true),
        "file:///data/x.sqlite?mode=ro&immutable=1"
    );
    assert_eq!(readonly_uri(Path::new("rel/x.sqlite"), false), "file:rel/x.sqlite?mode=ro");
    assert_eq!(
        readonly_uri(Path::new("/a b/?#%é"), false),
        "file:///a%20b/%3F%23%25%C3%A9?mode=ro"
    );
    assert_eq!(readonly_uri(Path::new("//host/x"), false), "file:////host/x?mode=ro");
}
