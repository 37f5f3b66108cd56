//! Tests of the JSONL offset computation and `.jsonl.idx` files.

use std::fs;

use proptest::prelude::*;

use super::*;

fn offsets(data: &[u8]) -> Result<Vec<u64>> {
    jsonl_offsets(Path::new("d.jsonl"), data)
}

#[track_caller]
fn check(data: &str, expected: &[u64]) {
    assert_eq!(offsets(data.as_bytes()).unwrap(), expected, "{data:?}");
}

#[track_caller]
fn check_bad(data: &str, expected_offset: u64, reason_part: &str) {
    match offsets(data.as_bytes()) {
        Err(Error::BadJsonl { offset, reason, .. }) => {
            assert_eq!(offset, expected_offset, "{data:?}");
            assert!(reason.contains(reason_part), "{reason}");
        }
        other => panic!("expected BadJsonl for {data:?}, got {other:?}"),
    }
}

#[test]
fn offsets_follow_the_reference() {
    check("{}\n", &[0, 3]);
    check("{\"a\": 1}\n{\"b\": 2}\n", &[0, 9, 18]);
    check("{}", &[0, 2]);
    check("{}\n{}", &[0, 3, 5]);
    // Leading blank lines belong to record 0.
    check("\n  \n{}\n{}\n", &[0, 7, 10]);
    // Blank lines after a record belong to it.
    check("{}\n\n \t\n{}\n", &[0, 7, 10]);
    check("{}\n\n\n", &[0, 5]);
    check("  {} \r\n{ }\r\n", &[0, 7, 12]);
    // Only the braces are checked, not the JSON.
    check("{not json}\n", &[0, 11]);
}

#[test]
fn bad_files_are_typed_errors() {
    check_bad("", 0, "empty");
    check_bad("\n \n\t", 0, "only blank lines");
    check_bad("{}\n[1, 2]\n{}\n", 3, "line 2");
    check_bad("{}\n{\n}\n", 3, "line 2");
    check_bad("\n\nnull\n", 2, "line 3");
}

#[test]
fn index_path_appends_idx() {
    assert_eq!(jsonl_idx_path(Path::new("d/x.jsonl")), PathBuf::from("d/x.jsonl.idx"));
}

fn fixture_jsonl() -> PathBuf {
    energon_fixtures::ref_small_dir().join("jsonl/data.jsonl")
}

#[test]
fn golden_offsets_equal_reference_index() {
    let path = fixture_jsonl();
    let ours = build_jsonl_offsets(&path).unwrap();
    let expected = fs::read(jsonl_idx_path(&path)).unwrap();
    assert_eq!(tar_idx::encode_offsets(&ours), expected);
    let idx = JsonlIndex::open(&path).unwrap();
    assert_eq!(idx.offsets(), &ours[..]);
    assert_eq!(idx.len(), ours.len() - 1);
    assert_eq!(idx.sample_range(1), Some((ours[1], ours[2])));
}

#[test]
fn write_then_open_round_trips_and_checks_the_size() {
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("d.jsonl");
    fs::write(&jsonl, "{}\n{\"a\":1}\n").unwrap();
    let offs = build_jsonl_offsets(&jsonl).unwrap();
    write_jsonl_idx(&jsonl_idx_path(&jsonl), &offs).unwrap();
    assert!(!dir.path().join("d.jsonl.idx.tmp").exists());
    let idx = JsonlIndex::open(&jsonl).unwrap();
    assert_eq!(idx.offsets(), &[0, 3, 11]);
    assert!(!idx.is_empty());
    assert_eq!(idx.sample_range(2), None);

    // The data changed since the index was written.
    fs::write(&jsonl, "{}\n{\"a\":12}\n").unwrap();
    match JsonlIndex::open(&jsonl) {
        Err(Error::CorruptIndex { offset: 16, reason, .. }) => {
            assert!(reason.contains("regenerate"), "{reason}");
        }
        other => panic!("expected CorruptIndex, got {other:?}"),
    }
    assert!(matches!(
        build_jsonl_offsets(&dir.path().join("missing.jsonl")),
        Err(Error::Io { op: "cannot open", .. })
    ));
    let empty = dir.path().join("empty.jsonl");
    fs::write(&empty, "").unwrap();
    assert!(matches!(build_jsonl_offsets(&empty), Err(Error::BadJsonl { offset: 0, .. })));
}

#[cfg(unix)]
#[test]
fn index_gets_jsonl_mode_with_owner_rw() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("d.jsonl");
    fs::write(&jsonl, "{}\n").unwrap();
    fs::set_permissions(&jsonl, fs::Permissions::from_mode(0o444)).unwrap();
    write_jsonl_idx(&jsonl_idx_path(&jsonl), &[0, 3]).unwrap();
    let mode = fs::metadata(jsonl_idx_path(&jsonl)).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o644);
}

/// The reference algorithm written line by line, as plainly as possible.
fn model(data: &[u8]) -> Option<Vec<u64>> {
    let mut res = Vec::new();
    let mut last_offset = 0;
    let mut pos = 0;
    for line in data.split_inclusive(|&b| b == b'\n') {
        pos += line.len() as u64;
        // Python's `bytes.strip()` also strips \x0b, which `trim_ascii` keeps.
        let is_space = |b: &u8| b" \t\n\r\x0b\x0c".contains(b);
        let start = line.iter().position(|b| !is_space(b)).unwrap_or(line.len());
        let end = line.iter().rposition(|b| !is_space(b)).map_or(start, |i| i + 1);
        let stripped = &line[start..end];
        if stripped.is_empty() {
            if last_offset != 0 {
                last_offset = pos;
            }
            continue;
        }
        if !(stripped.starts_with(b"{") && stripped.ends_with(b"}")) {
            return None;
        }
        res.push(last_offset);
        last_offset = pos;
    }
    (last_offset == data.len() as u64 && last_offset != 0).then(|| {
        res.push(last_offset);
        res
    })
}

fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => "[ \t]{0,2}\\{[a-z\": ,{}]{0,80}\\}[ \t\r]{0,2}".prop_map(String::into_bytes),
        2 => "[ \t\r\x0b\x0c]{0,3}".prop_map(String::into_bytes),
        1 => "[a-z\\[\\]{} ]{1,5}".prop_map(String::into_bytes),
    ]
}

proptest! {
    #[test]
    fn offsets_match_model(lines in proptest::collection::vec(line(), 0..30), final_newline in any::<bool>()) {
        let mut data = lines.join(&b'\n');
        if final_newline {
            data.push(b'\n');
        }
        match (offsets(&data), model(&data)) {
            (Ok(ours), Some(expected)) => prop_assert_eq!(ours, expected),
            (Err(Error::BadJsonl { offset, .. }), None) => prop_assert!(offset <= data.len() as u64),
            (ours, expected) => prop_assert!(false, "ours {ours:?}, model {expected:?}"),
        }
    }

    #[test]
    fn find_newline_matches_position(bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'a'), any::<u8>()], 0..200)) {
        prop_assert_eq!(find_newline(&bytes), bytes.iter().position(|&b| b == b'\n'));
    }
}
