//! Tests of in-place renames on shards written by the `tar` crate.

use std::{fs, path::Path};

use super::*;
use crate::tar_scan::scan_shard;

/// A shard of `(name, data)` members with headers made by `new_header`.
fn shard(path: &Path, members: &[(&str, &[u8])], new_header: fn() -> tar::Header) {
    let file = fs::File::create(path).unwrap();
    let mut builder = tar::Builder::new(file);
    for (name, data) in members {
        let mut header = new_header();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, name, *data).unwrap();
    }
    builder.finish().unwrap();
}

fn names(path: &Path) -> Vec<String> {
    scan_shard(path)
        .unwrap()
        .samples
        .iter()
        .flat_map(|s| s.parts.iter().map(move |p| format!("{}.{}", s.key, p.name)))
        .collect()
}

#[test]
fn members_move_into_the_shards_folder_and_keep_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data-0.tar");
    shard(
        &path,
        &[("000001.jpg", b"one"), ("000001.txt", b"caption"), ("a/b/000002.txt", b"x")],
        tar::Header::new_ustar,
    );
    let before = fs::read(&path).unwrap();
    let offsets_before = scan_shard(&path).unwrap().offsets();
    let prefix = shard_prefix("parts/data-0.tar");
    assert_eq!(apply_prefix(&path, &prefix).unwrap(), 3);
    let after = fs::read(&path).unwrap();
    assert_eq!(after.len(), before.len());
    assert_eq!(scan_shard(&path).unwrap().offsets(), offsets_before);
    assert_eq!(
        names(&path),
        [
            "parts/data-0.tar/000001.jpg",
            "parts/data-0.tar/000001.txt",
            "parts/data-0.tar/a/b/000002.txt"
        ]
    );
    // The data blocks are untouched; Python's tarfile (checksums) reads it, via the tar crate.
    let mut archive = tar::Archive::new(fs::File::open(&path).unwrap());
    let mut seen = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        seen.push((entry.path().unwrap().display().to_string(), data));
    }
    assert_eq!(seen[1], ("parts/data-0.tar/000001.txt".to_owned(), b"caption".to_vec()));
    // Again: nothing to do (an interrupted fix can be run again).
    assert_eq!(apply_prefix(&path, &prefix).unwrap(), 0);
    assert_eq!(fs::read(&path).unwrap(), after);
}

#[test]
fn long_names_use_the_ustar_prefix_field_or_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.tar");
    let long = format!("{}/{}.txt", "d".repeat(60), "k".repeat(40));
    shard(&path, &[(&long, b"x")], tar::Header::new_ustar);
    let prefix = shard_prefix(&"p".repeat(50));
    assert_eq!(apply_prefix(&path, &prefix).unwrap(), 1);
    assert_eq!(names(&path), [format!("{prefix}{long}")]);

    // GNU headers carry the ustar magic too: their prefix field takes the folder, as Python's
    // tarfile joins it whatever the magic.
    let gnu = dir.path().join("g.tar");
    let ninety = format!("{}.txt", "n".repeat(86));
    shard(&gnu, &[(&ninety, b"x")], tar::Header::new_gnu);
    assert_eq!(apply_prefix(&gnu, "shards/g.tar/").unwrap(), 1);
    assert_eq!(names(&gnu), [format!("shards/g.tar/{ninety}")]);

    // Pre-ustar headers have no prefix field: names end at 100 bytes.
    let old = dir.path().join("o.tar");
    shard(&old, &[(&ninety, b"x")], tar::Header::new_old);
    let before = fs::read(&old).unwrap();
    let err = apply_prefix(&old, "shards/o.tar/").unwrap_err();
    assert!(matches!(err, Error::CannotRename { offset: 0, .. }), "{err}");
    assert!(err.to_string().contains("o.tar"), "{err}");
    assert_eq!(fs::read(&old).unwrap(), before);
}

#[test]
fn names_held_outside_the_header_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A name over 100 bytes: the tar crate writes a GNU long-name member for it.
    let path = dir.path().join("l.tar");
    shard(&path, &[("short.txt", b"a"), (&"m".repeat(120), b"x")], tar::Header::new_gnu);
    let before = fs::read(&path).unwrap();
    let err = check_prefix(&path, "l.tar/").unwrap_err();
    assert!(err.to_string().contains("GNU long-name"), "{err}");
    assert!(matches!(err, Error::CannotRename { offset: 1024, .. }), "{err}");
    assert!(apply_prefix(&path, "l.tar/").is_err());
    assert_eq!(fs::read(&path).unwrap(), before, "nothing changes when a member is refused");
}
