//! Tests of `--no-sample-tables`, `--sample-tables-only` and duplicate keys over many shards.

use std::{fs, path::Path};

use super::{keys, options, write_shard};
use crate::{
    Error, INDEX_SQLITE, INDEX_UUID, NV_META,
    prepare::{PrepareOptions, prepare_dataset},
    sqlite::{SqliteIndex, dump_canonical},
    tar_idx,
};

fn db(root: &Path) -> std::path::PathBuf {
    root.join(NV_META).join(INDEX_SQLITE)
}

/// A dataset of `n` shards whose shard `i` holds `i % 5 + 1` samples.
fn write_dataset(root: &Path, n: usize) {
    for i in 0..n {
        write_shard(root, i, &keys(&format!("s{i:03}_"), i % 5 + 1));
    }
}

#[test]
fn tables_built_later_equal_a_full_prepare() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_dataset(root, 23);
    prepare_dataset(root, &options(), &|_| {}).unwrap();
    let full = dump_canonical(&db(root)).unwrap();
    let full_idx = fs::read(root.join("parts/data-7.tar.idx")).unwrap();
    assert!(full.contains("\"s022_0002\""), "{full}");

    let summary = prepare_dataset(root, &options().sample_tables(false), &|_| {}).unwrap();
    assert_eq!(summary.n_samples(), (0..23).map(|i| i % 5 + 1).sum::<u64>());
    assert_eq!(summary.first_keys, ["s000_0000"]);
    assert_eq!(summary.part_names, ["txt"]);
    assert_eq!(fs::read(root.join("parts/data-7.tar.idx")).unwrap(), full_idx);
    let without = dump_canonical(&db(root)).unwrap();
    assert!(!without.contains("table samples") && !without.contains("sample_parts"), "{without}");
    let uuid = fs::read(root.join(NV_META).join(INDEX_UUID)).unwrap();

    let info_before = fs::read(root.join(NV_META).join(crate::INFO_JSON)).unwrap();
    let split_before = fs::read(root.join(NV_META).join(crate::SPLIT_YAML)).unwrap();
    let summary = prepare_dataset(root, &options().sample_tables_only(true), &|_| {}).unwrap();
    assert_eq!(summary.shards.len(), 23);
    assert_eq!(dump_canonical(&db(root)).unwrap(), full, "the same schema and rows");
    assert_ne!(fs::read(root.join(NV_META).join(INDEX_UUID)).unwrap(), uuid, "a new index.uuid");
    assert_eq!(fs::read(root.join(NV_META).join(crate::INFO_JSON)).unwrap(), info_before);
    assert_eq!(fs::read(root.join(NV_META).join(crate::SPLIT_YAML)).unwrap(), split_before);
    assert_eq!(fs::read(root.join("parts/data-7.tar.idx")).unwrap(), full_idx);
}

#[test]
fn lookups_without_sample_tables_say_how_to_add_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_dataset(root, 3);
    prepare_dataset(root, &options().sample_tables(false), &|_| {}).unwrap();
    let index = SqliteIndex::open(&db(root)).unwrap();
    assert_eq!(index.schema_version(), None);
    for err in [
        index.sample_by_key("s000_0000").unwrap_err(),
        index.part_by_entry_name("s000_0000.txt").unwrap_err(),
        index.sample_count().unwrap_err(),
        index.list_entries().unwrap_err(),
    ] {
        assert!(matches!(err, Error::NoSampleTables { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("--no-sample-tables"), "{msg}");
        let fix = format!("energon prepare --sample-tables-only {}", root.display());
        assert!(msg.contains(&fix), "{msg}");
    }
}

#[test]
fn media_tables_survive_a_prepare_without_sample_tables() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_dataset(root, 2);
    prepare_dataset(root, &options(), &|_| {}).unwrap();
    {
        let mut writer =
            crate::sqlite::SqliteIndexWriter::create(&root.join("media.sqlite")).unwrap();
        writer.create_media_tables().unwrap();
        writer.add_media_metadata("s000_0000.txt", "image", "{}").unwrap();
        writer.finish().unwrap();
    }
    fs::rename(root.join("media.sqlite"), db(root)).unwrap();
    prepare_dataset(root, &options().sample_tables(false), &|_| {}).unwrap();
    let index = SqliteIndex::open(&db(root)).unwrap();
    assert!(index.media_metadata("s000_0000.txt").unwrap().is_some());
    prepare_dataset(root, &options().sample_tables_only(true), &|_| {}).unwrap();
    let index = SqliteIndex::open(&db(root)).unwrap();
    assert!(index.media_metadata("s000_0000.txt").unwrap().is_some());
    assert_eq!(index.sample_count().unwrap(), 3);
}

#[test]
fn sample_tables_only_refuses_a_shard_that_no_longer_matches_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_dataset(root, 4);
    prepare_dataset(root, &options().sample_tables(false), &|_| {}).unwrap();
    let before = fs::read(db(root)).unwrap();
    // Same number of samples, a second part in the first one: the offsets move.
    let file = fs::File::create(root.join("parts/data-2.tar")).unwrap();
    let mut builder = tar::Builder::new(file);
    for name in ["s002_0000.txt", "s002_0000.json", "s002_0001.txt", "s002_0002.txt"] {
        let mut header = tar::Header::new_ustar();
        header.set_size(2);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, &b"{}"[..]).unwrap();
    }
    builder.finish().unwrap();
    let err = prepare_dataset(root, &options().sample_tables_only(true), &|_| {}).unwrap_err();
    assert!(matches!(err, Error::Inconsistent { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("data-2.tar.idx") && msg.contains("data-2.tar"), "{msg}");
    assert!(msg.contains("sample 1 starts at byte 1024 in the index but at byte 2048"), "{msg}");
    assert_eq!(fs::read(db(root)).unwrap(), before, "the old index.sqlite stays");

    // Another number of samples.
    write_shard(root, 2, &keys("s002_", 4));
    let err = prepare_dataset(root, &options().sample_tables_only(true), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("the index has 3 samples, the shard 4"), "{err}");
    assert_eq!(tar_idx::count_samples(&root.join("parts/data-2.tar.idx")).unwrap(), 3);
}

#[test]
fn sample_tables_only_needs_a_prepared_dataset_and_no_conflicting_flags() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_dataset(root, 2);
    let err = prepare_dataset(root, &options().sample_tables_only(true), &|_| {}).unwrap_err();
    assert!(err.to_string().contains("--sample-tables-only needs an existing"), "{err}");
    for (bad, flag) in [
        (options().sample_tables_only(true).tar_index_only(true), "--tar-index-only"),
        (options().sample_tables_only(true).sample_tables(false), "--no-sample-tables"),
        (options().sample_tables_only(true).fix_duplicates(true), "--fix-duplicates"),
    ] {
        let err = prepare_dataset(root, &bad, &|_| {}).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains(flag), "{err}");
    }
}

#[test]
fn duplicates_across_many_shards_name_both_shards() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_dataset(root, 60);
    // Shard 47 repeats a key of shard 5, far apart and scanned by different workers.
    let mut dup = keys("s047_", 3);
    dup[1] = "s005_0000".to_owned();
    write_shard(root, 47, &dup);
    // The shard first in dataset order holds the first occurrence.
    let order = crate::discover::discover_shards(root).unwrap();
    let pos = |name: &str| order.iter().position(|s| s == name).unwrap();
    let mut pair = ["parts/data-5.tar", "parts/data-47.tar"];
    pair.sort_by_key(|name| pos(name));
    let expected = ("s005_0000", pair[0], pair[1]);
    for workers in [1, 8] {
        let opts = PrepareOptions::default().num_workers(workers);
        let err = prepare_dataset(root, &opts, &|_| {}).unwrap_err();
        let Error::DuplicateKey { key, first, second } = &err else { panic!("{err}") };
        assert_eq!((key.as_str(), first.as_str(), second.as_str()), expected, "{workers} workers");
    }
    // Without sample tables nothing checks the keys; building the tables later finds them.
    prepare_dataset(root, &options().sample_tables(false), &|_| {}).unwrap();
    let err = prepare_dataset(root, &options().sample_tables_only(true), &|_| {}).unwrap_err();
    let Error::DuplicateKey { key, first, second } = &err else { panic!("{err}") };
    assert_eq!((key.as_str(), first.as_str(), second.as_str()), expected);
}
