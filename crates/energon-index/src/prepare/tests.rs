//! Tests of the prepare commit: all-or-nothing replacement, the lock, stale temporary files.

use std::{fs, path::Path};

use super::*;
use crate::{INDEX_UUID, fsutil::PrepareLock};

fn write_shard(root: &Path, i: usize, keys: &[String]) {
    crate::testutil::write_text_shard(root, i, keys);
}

fn keys(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:04}")).collect()
}

fn options() -> PrepareOptions {
    PrepareOptions::default().num_workers(2)
}

/// Every index file of the dataset, by path relative to the root (lock file left out).
fn index_files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut res = Vec::new();
    for dir in ["parts", NV_META] {
        let mut entries: Vec<_> =
            fs::read_dir(root.join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".tar") || name == fsutil::PREPARE_LOCK {
                continue;
            }
            res.push((format!("{dir}/{name}"), fs::read(&path).unwrap()));
        }
    }
    res
}

#[test]
fn a_prepare_failing_before_the_commit_leaves_every_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_shard(root, 0, &keys("a", 3));
    write_shard(root, 1, &keys("b", 4));
    prepare_dataset(root, &options(), &|_| {}).unwrap();
    let before = index_files(root);

    // The shards change, and the last temporary file cannot be created.
    write_shard(root, 0, &keys("c", 5));
    let blocker = fsutil::process_tmp_path(&root.join(NV_META).join(INFO_JSON));
    fs::create_dir(&blocker).unwrap();
    let err = prepare_dataset(root, &options(), &|_| {}).unwrap_err();
    assert!(matches!(err, Error::Io { op: "cannot create", .. }), "{err}");
    fs::remove_dir(&blocker).unwrap();
    assert_eq!(index_files(root), before, "no file changed, no temporary file is left");

    // The next prepare succeeds and replaces everything.
    let summary = prepare_dataset(root, &options(), &|_| {}).unwrap();
    assert_eq!(summary.shard_counts, [5, 4]);
    let info = info::read_dataset_info(root).unwrap();
    assert_eq!(info.count_of("parts/data-0.tar"), Some(5));
    assert_eq!(tar_idx::count_samples(&root.join("parts/data-0.tar.idx")).unwrap(), 5);
}

#[test]
fn a_second_prepare_fails_at_once_naming_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_shard(root, 0, &keys("a", 2));
    fs::create_dir_all(root.join(NV_META)).unwrap();
    let lock = PrepareLock::acquire(root, &root.join(NV_META)).unwrap();
    let err = prepare_dataset(root, &options(), &|_| {}).unwrap_err();
    assert!(matches!(err, Error::Busy { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&root.display().to_string()), "{msg}");
    assert!(msg.contains("another `energon prepare`") && msg.contains("is running"), "{msg}");
    assert!(!root.join(NV_META).join(INFO_JSON).exists());
    drop(lock);
    prepare_dataset(root, &options(), &|_| {}).unwrap();
}

#[test]
fn stale_temporary_files_of_killed_prepares_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write_shard(root, 0, &keys("a", 2));
    fs::create_dir_all(root.join(NV_META)).unwrap();
    let stale = [
        "parts/data-0.tar.idx.tmp",
        "parts/data-0.tar.idx.99999999.tmp",
        ".nv-meta/index.sqlite.12.tmp",
        ".nv-meta/.info.json.7.tmp",
        ".nv-meta/.index.uuid.8.tmp",
        ".nv-meta/split.yaml.tmp",
    ];
    for rel in stale {
        fs::write(root.join(rel), b"stale").unwrap();
    }
    fs::write(root.join("parts/notes.7.tmp"), b"not ours").unwrap();
    prepare_dataset(root, &options(), &|_| {}).unwrap();
    for rel in stale {
        assert!(!root.join(rel).exists(), "{rel} was left");
    }
    assert!(root.join("parts/notes.7.tmp").exists());
    assert_eq!(fs::read_to_string(root.join(NV_META).join(INDEX_UUID)).unwrap().len(), 36);
}

#[test]
fn staged_files_commit_in_order_and_drop_removes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    fs::write(&a, b"old a").unwrap();
    let mut staged = fsutil::Staged::new(None);
    let tmp_a = staged.add(&a);
    staged.barrier();
    let tmp_b = staged.add(&b);
    fsutil::write_synced(&tmp_a, b"new a", None).unwrap();
    fsutil::write_synced(&tmp_b, b"new b", None).unwrap();
    drop(staged);
    assert!(!tmp_a.exists() && !tmp_b.exists());
    assert_eq!(fs::read(&a).unwrap(), b"old a");
    assert!(!b.exists());

    let mut staged = fsutil::Staged::new(None);
    let tmp_a = staged.add(&a);
    let tmp_b = staged.add(&b);
    fsutil::write_synced(&tmp_a, b"new a", None).unwrap();
    // `b`'s temporary file is missing: `a` is in place, the error says so.
    let err = staged.commit().unwrap_err();
    assert!(err.to_string().contains("partly replaced"), "{err}");
    assert_eq!(fs::read(&a).unwrap(), b"new a");
    assert!(!tmp_b.exists());
}

#[test]
fn stale_tmp_names_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["x.tar.idx.tmp", "x.tar.idx.42.tmp", "x.tar.idx.4a.tmp", "x.tar.idx", "y.tmp"];
    for name in names {
        fs::write(dir.path().join(name), b"").unwrap();
    }
    let wanted = ["x.tar.idx".to_owned()].into_iter().collect();
    fsutil::remove_stale_tmp_files(dir.path(), &wanted);
    let mut left: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["x.tar.idx", "x.tar.idx.4a.tmp", "y.tmp"]);
    let own = fsutil::process_tmp_path(Path::new("d/x"));
    assert_eq!(own, Path::new(&format!("d/x.{}.tmp", std::process::id())));
}

#[test]
fn fix_duplicates_moves_members_into_shard_folders_and_indexes_again() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // The same keys in both shards.
    write_shard(root, 0, &keys("k", 3));
    write_shard(root, 1, &keys("k", 3));
    let err = prepare_dataset(root, &options(), &|_| {}).unwrap_err();
    let Error::DuplicateKey { key, .. } = &err else { panic!("{err}") };
    assert!(key.starts_with('k'), "{err}");
    assert!(err.to_string().contains("--fix-duplicates"), "{err}");
    let shard0 = fs::read(root.join("parts/data-0.tar")).unwrap();

    let events = std::sync::Mutex::new(Vec::new());
    let progress = |event: Progress| {
        if let Progress::FixingDuplicates { key } = event {
            events.lock().unwrap().push(key);
        }
    };
    let summary = prepare_dataset(root, &options().fix_duplicates(true), &progress).unwrap();
    assert_eq!(events.into_inner().unwrap().len(), 1);
    let fixed = summary.fixed_duplicates.clone().unwrap();
    assert_eq!(fixed.members_renamed, 6);
    assert_eq!(summary.n_samples(), 6);
    assert_eq!(summary.first_keys, ["parts/data-0.tar/k0000", "parts/data-0.tar/k0001"]);
    let after = fs::read(root.join("parts/data-0.tar")).unwrap();
    assert_eq!(after.len(), shard0.len(), "shards keep their size and layout");
    let scan = crate::tar_scan::scan_shard(&root.join("parts/data-1.tar")).unwrap();
    assert_eq!(scan.samples[2].key, "parts/data-1.tar/k0002");

    // A dataset without duplicates is left as it is.
    let clean = tempfile::tempdir().unwrap();
    write_shard(clean.path(), 0, &keys("a", 2));
    let before = fs::read(clean.path().join("parts/data-0.tar")).unwrap();
    let summary = prepare_dataset(clean.path(), &options().fix_duplicates(true), &|_| {}).unwrap();
    assert!(summary.fixed_duplicates.is_none());
    assert_eq!(fs::read(clean.path().join("parts/data-0.tar")).unwrap(), before);
}

mod sample_tables;
