//! Tests of shards changed after prepare: replaced, rewritten with other keys.

use std::fs;

use energon_index::prepare::{PrepareOptions, prepare_dataset};
use energon_tests::{TarFormat, write_tar};

use super::*;

/// Shard `shards/s-<i>.tar` with one `txt` member of `size` bytes per key.
fn shard(root: &Path, i: usize, keys: &[String], size: usize) {
    fs::create_dir_all(root.join("shards")).unwrap();
    let members: Vec<(String, Vec<u8>)> =
        keys.iter().map(|k| (format!("{k}.txt"), vec![b'x'; size])).collect();
    write_tar(&root.join(format!("shards/s-{i}.tar")), TarFormat::Ustar, &members).unwrap();
}

fn keys(prefix: &str) -> Vec<String> {
    (0..10).map(|i| format!("{prefix}{i:04}")).collect()
}

/// Two prepared shards of the same size: keys `a0000..a0009` and `b0000..b0009`.
fn dataset() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    shard(dir.path(), 0, &keys("a"), 10);
    shard(dir.path(), 1, &keys("b"), 10);
    prepare_dataset(dir.path(), &PrepareOptions::default(), &|_| {}).unwrap();
    dir
}

fn open(root: &Path) -> WebDataset {
    WebDataset::open(root, &OpenOptions::default()).unwrap()
}

#[test]
fn a_shard_replaced_by_one_of_the_same_size_is_a_typed_error() {
    let dir = dataset();
    let s = dir.path().join("shards");
    fs::copy(s.join("s-1.tar"), s.join("s-0.tar")).unwrap();
    let ds = open(dir.path());
    let err = ds.read(3).unwrap_err();
    let Error::ShardChanged { at, index, reason } = &err else { panic!("{err}") };
    assert_eq!(
        (at.shard.as_str(), at.key.as_deref(), at.offset),
        ("shards/s-0.tar", Some("a0000"), 0)
    );
    assert!(index.ends_with("index.sqlite"), "{err}");
    assert!(reason.contains("\"b0000\""), "{err}");
    // The other shard is fine.
    assert_eq!(ds.read(10).unwrap().unwrap().key, "b0000");
    assert_eq!(ds.check_shards().len(), 1);
}

#[test]
fn a_shard_rewritten_with_other_keys_is_a_typed_error() {
    let dir = dataset();
    shard(dir.path(), 0, &keys("c"), 700);
    let err = open(dir.path()).read(1).unwrap_err();
    assert!(
        matches!(&err, Error::ShardChanged { at, .. } if at.shard == "shards/s-0.tar"),
        "{err}"
    );
    assert!(err.to_string().contains("s-0.tar.idx"), "{err}");

    // Without index.sqlite, the header at the indexed offset is checked on every read.
    fs::remove_file(dir.path().join(".nv-meta/index.sqlite")).unwrap();
    let ds = open(dir.path());
    let err = ds.read(1).unwrap_err();
    let Error::ShardChanged { at, reason, .. } = &err else { panic!("{err}") };
    assert_eq!((at.shard.as_str(), at.index, at.offset), ("shards/s-0.tar", Some(1), 1024));
    assert!(reason.contains("points to sample 1"), "{err}");
}

#[test]
fn a_truncated_shard_is_a_typed_error_naming_both_sizes() {
    let dir = dataset();
    let path = dir.path().join("shards/s-1.tar");
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..5000]).unwrap();
    let ds = open(dir.path());
    assert!(ds.read(9).is_ok());
    let err = ds.read(10).unwrap_err();
    let Error::ShardChanged { at, reason, .. } = &err else { panic!("{err}") };
    assert_eq!(at.shard, "shards/s-1.tar");
    assert!(reason.contains("5000 bytes") && reason.contains("10240"), "{err}");
}

#[test]
fn a_shard_that_shrinks_while_it_is_mapped_is_a_typed_error_not_sigbus() {
    let dir = tempfile::tempdir().unwrap();
    // Samples of 8 KiB: the last ones lie on pages past the cut below.
    shard(dir.path(), 0, &keys("a"), 8000);
    prepare_dataset(dir.path(), &PrepareOptions::default(), &|_| {}).unwrap();
    let path = dir.path().join("shards/s-0.tar");
    let whole = fs::read(&path).unwrap();
    let ds = open(dir.path());
    assert_eq!(ds.read(0).unwrap().unwrap().key, "a0000");
    // Re-synced underneath the running reader: truncated (as `cp` does before writing).
    fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(16 * 1024).unwrap();
    let err = ds.read(8).unwrap_err();
    let Error::ShardChanged { at, reason, .. } = &err else { panic!("{err}") };
    assert_eq!((at.shard.as_str(), at.index), ("shards/s-0.tar", Some(8)));
    assert!(reason.contains("truncated or rewritten while it was read"), "{err}");
    // Written back whole: the next read maps it again and reads it.
    fs::write(&path, &whole).unwrap();
    assert_eq!(ds.read(8).unwrap().unwrap().key, "a0008");
}
