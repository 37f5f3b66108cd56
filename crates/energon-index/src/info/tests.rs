//! Tests of `.info.json` / `.info.yaml`, golden against the reference fixture.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

fn fixture_info() -> DatasetInfo {
    DatasetInfo {
        energon_version: Some("7.4.1".to_owned()),
        shard_counts: (0..4).map(|i| (format!("shards/data-{i:06}.tar"), 50)).collect(),
    }
}

/// Parses `text` as an info value and expects an error mentioning `needle`.
fn check_bad(text: &str, needle: &str) {
    let value: Value = serde_json::from_str(text).unwrap();
    let err = DatasetInfo::from_value(&value, Path::new("x/.info.json")).unwrap_err().to_string();
    assert!(err.contains(needle) && err.contains("x/.info.json"), "{text}: {err}");
}

#[test]
fn reads_the_reference_info() {
    let info = read_dataset_info(&fixture()).unwrap();
    assert_eq!(info, fixture_info());
    assert_eq!(info.n_samples(), 200);
    assert_eq!(info.count_of("shards/data-000002.tar"), Some(50));
    assert_eq!(info.count_of("nope.tar"), None);
    assert_eq!(info.shard_names().next(), Some("shards/data-000000.tar"));
}

#[test]
fn writes_the_reference_info_byte_for_byte() {
    let want = std::fs::read(fixture().join(".nv-meta/.info.json")).unwrap();
    assert_eq!(info_json_bytes(&fixture_info()).as_bytes(), want.as_slice());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".info.json");
    write_info_json(&path, &fixture_info()).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), want);
    assert_eq!(read_info_json(&path).unwrap(), fixture_info());
}

#[test]
fn json_escapes_like_python_ensure_ascii() {
    let info = DatasetInfo {
        energon_version: Some("7.4.1".to_owned()),
        shard_counts: vec![("z/é 日本 🎉\"\\\t\x7f.tar".to_owned(), 3), ("a.tar".to_owned(), 0)],
    };
    assert_eq!(
        info_json_bytes(&info),
        "{\n  \"energon_version\": \"7.4.1\",\n  \"shard_counts\": {\n    \
         \"z/\\u00e9 \\u65e5\\u672c \\ud83c\\udf89\\\"\\\\\\t\\u007f.tar\": 3,\n    \"a.tar\": 0\n  }\n}"
    );
    let empty = DatasetInfo { energon_version: Some("x".to_owned()), shard_counts: Vec::new() };
    assert_eq!(
        info_json_bytes(&empty),
        "{\n  \"energon_version\": \"x\",\n  \"shard_counts\": {}\n}"
    );
    // Reading back gives the same info, order included.
    let value: Value = serde_json::from_str(&info_json_bytes(&info)).unwrap();
    assert_eq!(DatasetInfo::from_value(&value, Path::new("x")).unwrap(), info);
}

#[test]
fn legacy_yaml_is_read_when_json_is_missing_and_written_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join(NV_META);
    std::fs::create_dir(&meta).unwrap();
    let yaml_path = meta.join(INFO_YAML);
    write_info_yaml(&yaml_path, &fixture_info()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&yaml_path).unwrap(),
        "energon_version: 7.4.1\nshard_counts:\n  shards/data-000000.tar: 50\n  shards/data-000001.tar: 50\n  \
         shards/data-000002.tar: 50\n  shards/data-000003.tar: 50\n"
    );
    assert_eq!(read_dataset_info(dir.path()).unwrap(), fixture_info());
    // An old file without a version, in non-sorted order: order is kept on reading.
    std::fs::write(&yaml_path, "shard_counts:\n  b.tar: 2\n  a.tar: 1\n").unwrap();
    let info = read_dataset_info(dir.path()).unwrap();
    assert_eq!(info.energon_version, None);
    assert_eq!(info.shard_counts, [("b.tar".to_owned(), 2), ("a.tar".to_owned(), 1)]);
    assert_eq!(info.to_value(), json!({"shard_counts": {"b.tar": 2, "a.tar": 1}}));
    // The JSON file wins when both exist.
    write_info_json(&meta.join(INFO_JSON), &fixture_info()).unwrap();
    assert_eq!(read_dataset_info(dir.path()).unwrap(), fixture_info());
}

#[test]
fn malformed_info_is_a_typed_error() {
    check_bad("[]", "expected a mapping");
    check_bad("{}", "missing key \"shard_counts\"");
    check_bad("{\"shard_counts\": {\"a\": -1}}", "non-negative integer");
    check_bad("{\"shard_counts\": {\"a\": 1.5}}", "non-negative integer");
    check_bad("{\"shard_counts\": []}", "expected a mapping");
    check_bad("{\"shard_counts\": {}, \"energon_version\": 7}", "energon_version");
    check_bad("{\"shard_counts\": {}, \"extra\": 1}", "unknown key \"extra\"");
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(read_dataset_info(dir.path()), Err(Error::NotADataset { .. })));
    std::fs::create_dir(dir.path().join(NV_META)).unwrap();
    std::fs::write(dir.path().join(NV_META).join(INFO_JSON), "{\"shard_counts\": ").unwrap();
    let err = read_dataset_info(dir.path()).unwrap_err().to_string();
    assert!(err.contains(".info.json") && err.contains("line 1"), "{err}");
}

#[test]
fn dump_json_matches_python_for_lists_and_floats() {
    let v = json!({"split_parts": {"train": ["a", "b"], "val": []}, "exclude": []});
    assert_eq!(
        dump_json(&v),
        "{\n  \"split_parts\": {\n    \"train\": [\n      \"a\",\n      \"b\"\n    ],\n    \"val\": []\n  \
         },\n  \"exclude\": []\n}"
    );
    assert_eq!(
        dump_json(&json!([1e16, 0.5, -3, true, null])),
        "[\n  1e+16,\n  0.5,\n  -3,\n  true,\n  null\n]"
    );
}
