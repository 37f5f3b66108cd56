//! Tests of `.tar.idx` naming, writing and validation.

use std::fs;

use proptest::prelude::*;

use super::*;

#[test]
fn index_path_follows_python_with_suffix() {
    for (shard, idx) in [
        ("d/x.tar", "d/x.tar.idx"),
        ("d/x.tgz", "d/x.tar.idx"),
        ("d/x", "d/x.tar.idx"),
        ("d/a.b.tar", "d/a.b.tar.idx"),
        ("d/a.", "d/a..tar.idx"),
        ("d/.tar", "d/.tar.tar.idx"),
        ("dir.d/x", "dir.d/x.tar.idx"),
    ] {
        assert_eq!(tar_idx_path(Path::new(shard)), PathBuf::from(idx), "{shard}");
    }
}

#[test]
fn write_then_open_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    fs::write(&shard, [0u8; 4096]).unwrap();
    write_tar_idx(&shard, &[0, 1024, 2048]).unwrap();
    let idx_path = dir.path().join("s.tar.idx");
    assert_eq!(fs::read(&idx_path).unwrap().len(), 24);
    assert!(!dir.path().join("s.tar.idx.tmp").exists());
    let idx = TarIndex::open(&idx_path).unwrap();
    assert_eq!((idx.len(), idx.offsets(), idx.end_offset()), (2, &[0, 1024, 2048][..], 2048));
    assert_eq!(idx.sample_range(0), Some((0, 1024)));
    assert_eq!(idx.sample_range(1), Some((1024, 2048)));
    assert_eq!(idx.sample_range(2), None);
    assert_eq!(idx.sample_range(usize::MAX), None);
    assert!(idx.check_shard_len(4096).is_ok());
    assert!(matches!(idx.check_shard_len(2000), Err(Error::CorruptIndex { offset: 16, .. })));
    assert_eq!(count_samples(&idx_path).unwrap(), 2);
}

#[cfg(unix)]
#[test]
fn index_gets_shard_mode_with_owner_rw() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    fs::write(&shard, b"").unwrap();
    fs::set_permissions(&shard, fs::Permissions::from_mode(0o444)).unwrap();
    write_tar_idx(&shard, &[0, 512]).unwrap();
    let mode = fs::metadata(dir.path().join("s.tar.idx")).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o644);
}

#[track_caller]
fn check_corrupt(bytes: &[u8], expected_offset: u64, reason_part: &str) {
    match TarIndex::from_bytes(Path::new("x.tar.idx"), bytes) {
        Err(Error::CorruptIndex { offset, reason, .. }) => {
            assert_eq!(offset, expected_offset);
            assert!(reason.contains(reason_part), "{reason}");
        }
        other => panic!("expected CorruptIndex, got {other:?}"),
    }
}

#[test]
fn corrupt_indexes_are_typed_errors() {
    check_corrupt(b"", 0, "multiple of 8");
    check_corrupt(&[0; 12], 8, "multiple of 8");
    check_corrupt(&encode_offsets(&[0, 1024, 512, 2048]), 16, "decrease");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.tar.idx");
    assert!(matches!(TarIndex::open(&missing), Err(Error::Io { op: "cannot read", .. })));
    assert!(matches!(count_samples(&missing), Err(Error::Io { .. })));
}

#[test]
fn indexes_the_reader_refuses_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().join("s.tar");
    for (offsets, at, reason) in
        [(&[0, 1024, 512, 2048][..], 16, "offsets decrease (512 after 1024)"), (&[], 0, "size 0")]
    {
        let err = write_tar_idx(&shard, offsets).unwrap_err();
        let Error::CorruptIndex { path, offset, reason: why } = &err else { panic!("{err:?}") };
        assert_eq!((path, *offset), (&dir.path().join("s.tar.idx"), at));
        assert!(why.contains(reason) && why.contains("not written"), "{why}");
        assert!(!dir.path().join("s.tar.idx").exists());
        assert!(!dir.path().join("s.tar.idx.tmp").exists());
    }
    // Equal offsets (an empty member range) are what the reader accepts.
    write_tar_idx(&shard, &[0, 512, 512]).unwrap();
    assert_eq!(TarIndex::open(&dir.path().join("s.tar.idx")).unwrap().len(), 2);
}

#[test]
fn single_entry_index_has_no_samples() {
    let idx = TarIndex::from_bytes(Path::new("x.tar.idx"), &encode_offsets(&[0])).unwrap();
    assert!(idx.is_empty());
    assert_eq!(idx.sample_range(0), None);
}

#[test]
fn golden_fixture_indexes_load() {
    let shards = energon_fixtures::ref_small_dir().join("shards");
    for i in 0..4 {
        let shard = shards.join(format!("data-00000{i}.tar"));
        let idx = TarIndex::open(&tar_idx_path(&shard)).unwrap();
        assert_eq!(idx.len(), 50);
        idx.check_shard_len(fs::metadata(&shard).unwrap().len()).unwrap();
        assert_eq!(count_samples(&tar_idx_path(&shard)).unwrap(), 50);
    }
}

proptest! {
    #[test]
    fn write_read_round_trip(mut offsets in proptest::collection::vec(any::<u64>(), 1..200)) {
        offsets.sort_unstable();
        let dir = tempfile::tempdir().unwrap();
        let shard = dir.path().join("p.tar");
        write_tar_idx(&shard, &offsets).unwrap();
        let idx = TarIndex::open(&tar_idx_path(&shard)).unwrap();
        prop_assert_eq!(idx.offsets(), &offsets[..]);
        prop_assert_eq!(idx.len(), offsets.len() - 1);
        for i in 0..idx.len() {
            prop_assert_eq!(idx.sample_range(i), Some((offsets[i], offsets[i + 1])));
        }
    }

    #[test]
    fn arbitrary_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        match TarIndex::from_bytes(Path::new("x.tar.idx"), &bytes) {
            Ok(idx) => prop_assert_eq!(encode_offsets(idx.offsets()), bytes),
            Err(Error::CorruptIndex { offset, .. }) => prop_assert!(offset <= bytes.len() as u64),
            Err(err) => prop_assert!(false, "unexpected {err}"),
        }
    }
}
