//! Tests of the YAML loader (Energon's casting) and emitter (PyYAML's output).
//!
//! Expected dumps were produced by PyYAML 6.0.3 `yaml.dump(value, sort_keys=False)`.

use std::path::Path;

use serde_json::{Value, json};

use super::*;
use crate::Error;

fn load(text: &str) -> Value {
    parse_yaml(text, Path::new("t.yaml")).unwrap()
}

/// Loads `text` and compares with `want`.
fn check_load(text: &str, want: Value) {
    assert_eq!(load(text), want, "{text:?}");
}

/// Loading `text` fails at `line`/`column` with a reason containing `needle`.
fn check_load_error(text: &str, line: usize, column: usize, needle: &str) {
    match parse_yaml(text, Path::new("bad.yaml")) {
        Err(Error::BadYaml { path, line: l, column: c, reason }) => {
            assert_eq!(path, Path::new("bad.yaml"));
            assert_eq!((l, c), (line, column), "{text:?}: {reason}");
            assert!(reason.contains(needle), "{text:?}: {reason}");
        }
        other => panic!("{text:?}: expected BadYaml, got {other:?}"),
    }
}

fn check_cast(text: &str, want: Value) {
    assert_eq!(cast_plain_scalar(text).unwrap(), want, "{text:?}");
}

fn check_dump(value: Value, want: &str) {
    assert_eq!(dump_yaml(&value, DumpOptions { sort_keys: false }), want, "{value}");
}

#[test]
fn plain_scalars_are_cast_like_energon() {
    check_cast("null", Value::Null);
    check_cast("NuLl", Value::Null);
    check_cast("~", Value::Null);
    check_cast("", Value::Null);
    check_cast("yes", json!(true));
    check_cast("YES", json!(true));
    check_cast("True", json!(true));
    check_cast("no", json!(false));
    check_cast("FALSE", json!(false));
    check_cast("on", json!("on"));
    check_cast("off", json!("off"));
    check_cast("42", json!(42));
    check_cast("-7", json!(-7));
    check_cast("+0005", json!(5));
    check_cast("1_000", json!(1000));
    check_cast("18446744073709551615", json!(18_446_744_073_709_551_615_u64));
    check_cast("0x10", json!("0x10"));
    check_cast("0o7", json!("0o7"));
    check_cast("1.5", json!(1.5));
    check_cast("1.", json!(1.0));
    check_cast(".5", json!(0.5));
    check_cast("1e3", json!(1000.0));
    check_cast("1E-2", json!(0.01));
    check_cast("1.2.3", json!("1.2.3"));
    check_cast("e", json!("e"));
    check_cast("jpg", json!("jpg"));
    check_cast("v1.0", json!("v1.0"));
    check_cast("2024-01-01", json!("2024-01-01"));
    check_cast(".inf", json!(".inf"));
}

#[test]
fn unrepresentable_numbers_are_errors() {
    assert!(cast_plain_scalar("1e999").unwrap_err().contains("not finite"));
    assert!(cast_plain_scalar("99999999999999999999").unwrap_err().contains("64 bits"));
    check_load_error("a: [1, 1e999]", 1, 8, "not finite");
}

#[test]
fn quoted_and_block_scalars_stay_strings() {
    check_load(
        "a: 'yes'\nb: \"1.5\"\nc: |\n  12\nd: >\n  null\ne: yes\n",
        json!({"a": "yes", "b": "1.5", "c": "12\n", "d": "null\n", "e": true}),
    );
}

#[test]
fn keys_are_never_cast() {
    check_load("1: a\nyes: b\n~: c\n'q': d\n", json!({"1": "a", "yes": "b", "~": "c", "q": "d"}));
}

#[test]
fn nested_structures_keep_order() {
    check_load(
        "sample_type: {__module__: megatron.energon, __class__: CaptioningSample}\nfield_map:\n  \
         image: jpg\n  caption: txt\nlist: [1, two, [3]]\n",
        json!({
            "sample_type": {"__module__": "megatron.energon", "__class__": "CaptioningSample"},
            "field_map": {"image": "jpg", "caption": "txt"},
            "list": [1, "two", [3]],
        }),
    );
    let v = load("z: 1\na: 2\nm: 3\n");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["z", "a", "m"]);
}

#[test]
fn repeated_keys_keep_first_position_and_last_value() {
    let v = load("a: 1\nb: 2\na: 3\n");
    assert_eq!(v, json!({"a": 3, "b": 2}));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["a", "b"]);
}

#[test]
fn empty_values_are_null_and_tags_are_ignored() {
    check_load("a:\nb: !!str 5\nc: &x v\n", json!({"a": null, "b": 5, "c": "v"}));
    check_load("- 1\n- two\n", json!([1, "two"]));
    check_load("just text", json!("just text"));
}

#[test]
fn malformed_yaml_names_file_line_and_column() {
    check_load_error("a: [1, 2\nb: 3\n", 2, 2, "");
    check_load_error("a: &x 1\nb: *x\n", 2, 4, "aliases");
    check_load_error("a: 1\n---\nb: 2\n", 2, 1, "more than one");
    check_load_error("", 1, 1, "empty document");
    check_load_error("? [a]\n: 1\n", 1, 3, "keys must be scalars");
    check_load_error("a: 'open\n", 1, 4, "quoted scalar");
}

#[test]
fn load_yaml_or_json_goes_by_extension() {
    let dir = tempfile::tempdir().unwrap();
    let yaml_path = dir.path().join("x.yaml");
    let json_path = dir.path().join("x.json");
    let other = dir.path().join("x.txt");
    std::fs::write(&yaml_path, "a: yes\n").unwrap();
    std::fs::write(&json_path, "{\"a\": \"yes\"}").unwrap();
    std::fs::write(&other, "a: 1").unwrap();
    assert_eq!(load_yaml_or_json(&yaml_path).unwrap(), json!({"a": true}));
    assert_eq!(load_yaml_or_json(&json_path).unwrap(), json!({"a": "yes"}));
    assert!(matches!(load_yaml_or_json(&other), Err(Error::BadMetadata { .. })));
    assert!(matches!(load_yaml(&dir.path().join("missing.yaml")), Err(Error::Io { .. })));
    std::fs::write(&json_path, "{\"a\": ").unwrap();
    let err = load_yaml_or_json(&json_path).unwrap_err().to_string();
    assert!(err.contains("x.json") && err.contains("line 1"), "{err}");
}

#[test]
fn dump_matches_pyyaml_for_split_files() {
    check_dump(
        json!({"split_parts": {"train": ["shards/data-{000000..000003}.tar"]}, "exclude": []}),
        "split_parts:\n  train:\n  - shards/data-{000000..000003}.tar\nexclude: []\n",
    );
    check_dump(
        json!({"split_parts": {"train": [], "val": ["a.tar"], "test": []}, "exclude": []}),
        "split_parts:\n  train: []\n  val:\n  - a.tar\n  test: []\nexclude: []\n",
    );
}

#[test]
fn dump_quotes_strings_like_pyyaml() {
    let items = [
        "yes",
        "No",
        "on",
        "null",
        "~",
        "",
        "1",
        "01",
        "0x1F",
        "1.5",
        "1e5",
        "1:20",
        "2024-01-01",
        "<<",
        "=",
        "-",
        "- a",
        "a: b",
        "a #b",
        "#x",
        "x,y",
        "[x]",
        "&a",
        "'q'",
        "a'b",
        "é",
        "日本",
        "a\nb",
        "a ",
        " a",
        "1_000",
        ".inf",
        "on2",
        "-.5",
    ];
    check_dump(
        json!({ "k": items.to_vec() }),
        "k:\n- 'yes'\n- 'No'\n- 'on'\n- 'null'\n- '~'\n- ''\n- '1'\n- '01'\n- '0x1F'\n- '1.5'\n- 1e5\n\
         - '1:20'\n- '2024-01-01'\n- '<<'\n- '='\n- '-'\n- '- a'\n- 'a: b'\n- 'a #b'\n- '#x'\n- x,y\n\
         - '[x]'\n- '&a'\n- '''q'''\n- a'b\n- \"\\xE9\"\n- \"\\u65E5\\u672C\"\n- 'a\n\n  b'\n- 'a '\n\
         - ' a'\n- '1_000'\n- '.inf'\n- on2\n- -.5\n",
    );
}

#[test]
fn dump_writes_numbers_keys_and_nesting_like_pyyaml() {
    let long_key = "x".repeat(130);
    let mut map = serde_json::Map::new();
    map.insert("yes".into(), json!(1));
    map.insert("a: b".into(), json!(true));
    map.insert(long_key.clone(), Value::Null);
    map.insert("a\nb".into(), json!(2.5));
    map.insert(String::new(), json!(1e16));
    map.insert("n".into(), json!([0.1, -0.0, 1e-05, 123_456_789_012_345_678_u64]));
    check_dump(
        Value::Object(map),
        &format!(
            "'yes': 1\n'a: b': true\n? {long_key}\n: null\n? 'a\n\n  b'\n: 2.5\n? ''\n: 1.0e+16\nn:\n- 0.1\n\
             - -0.0\n- 1.0e-05\n- 123456789012345678\n"
        ),
    );
    check_dump(
        json!([[1, [2, []]], {"a": [{"b": 1}]}]),
        "- - 1\n  - - 2\n    - []\n- a:\n  - b: 1\n",
    );
    check_dump(json!("plain"), "plain\n...\n");
    check_dump(json!(""), "''\n");
    check_dump(Value::Null, "null\n...\n");
}

#[test]
fn dump_folds_long_scalars_at_80_columns() {
    check_dump(
        json!({ "k": "word ".repeat(30) }),
        "k: 'word word word word word word word word word word word word word word word word\n  \
         word word word word word word word word word word word word word word '\n",
    );
    check_dump(
        json!({ "k": format!("{} tail", "w".repeat(100)) }),
        &format!("k: {}\n  tail\n", "w".repeat(100)),
    );
    let key = "long key ".repeat(15);
    check_dump(
        json!({ key: {"nested": {"deep": []}}, "e": {} }),
        "? 'long key long key long key long key long key long key long key long key long key\n  \
         long key long key long key long key long key long key '\n: nested:\n    deep: []\ne: {}\n",
    );
}

#[test]
fn dump_can_sort_keys() {
    let v = json!({"shard_counts": {"b.tar": 2, "a.tar": 1}, "energon_version": "7.4.1"});
    assert_eq!(
        dump_yaml(&v, DumpOptions { sort_keys: true }),
        "energon_version: 7.4.1\nshard_counts:\n  a.tar: 1\n  b.tar: 2\n"
    );
}

#[test]
fn dumped_yaml_reads_back() {
    let v = json!({
        "sample_type": {"__module__": "megatron.energon", "__class__": "CaptioningSample"},
        "field_map": {"image": "jpg,png", "caption": "json[caption][0]"},
        "subflavors": {"yes": "no", "n": 3, "f": 0.5, "s": "1.5", "t": true, "none": null},
    });
    assert_eq!(load(&dump_yaml(&v, DumpOptions::default())), v);
}
