//! Tests of split files, brace expansion and collapse.
//!
//! Expected expansions are those of Python `braceexpand` 0.1.7; expected collapses those of
//! Energon's `bracecollapse.collapse(keep_order=True)`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

fn check_expand(pattern: &str, want: &[&str]) {
    assert_eq!(brace_expand(pattern).unwrap(), want, "{pattern:?}");
}

fn check_collapse(names: &[&str], want: &[&str]) {
    let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(collapse(&names), want, "{names:?}");
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn counts(names: &[&str]) -> Vec<(String, u64)> {
    names.iter().enumerate().map(|(i, n)| ((*n).to_owned(), 10 + i as u64)).collect()
}

#[test]
fn expands_sequences_and_nesting() {
    check_expand("{1,2}", &["1", "2"]);
    check_expand("{1}", &["{1}"]);
    check_expand("{1,2{}}", &["1", "2{}"]);
    check_expand("}{", &["}{"]);
    check_expand("a{b,c}d{e,f}", &["abde", "abdf", "acde", "acdf"]);
    check_expand("a{b,c{d,e,}}", &["ab", "acd", "ace", "ac"]);
    check_expand("a{b,{c,{d,e}}}", &["ab", "ac", "ad", "ae"]);
    check_expand("{{a,b},{c,d}}", &["a", "b", "c", "d"]);
    check_expand("{,}", &["", ""]);
    check_expand("{a.{b,c}}", &["{a.b}", "{a.c}"]);
    check_expand("{a.{1..2}}", &["{a.1}", "{a.2}"]);
    check_expand("{{{,}}}", &["{{}}", "{{}}"]);
    check_expand("plain.tar", &["plain.tar"]);
    check_expand("", &[""]);
}

#[test]
fn expands_integer_ranges() {
    check_expand("{7..10}", &["7", "8", "9", "10"]);
    check_expand("{10..7}", &["10", "9", "8", "7"]);
    check_expand("{1..5..2}", &["1", "3", "5"]);
    check_expand("{5..1..2}", &["5", "3", "1"]);
    check_expand("{1..3..0}", &["1", "2", "3"]);
    check_expand("{1..3..-0}", &["1", "2", "3"]);
    check_expand("{07..10}", &["07", "08", "09", "10"]);
    check_expand("{7..010}", &["007", "008", "009", "010"]);
    check_expand("{1..-2}", &["1", "0", "-1", "-2"]);
    check_expand("{01..-2}", &["01", "00", "-1", "-2"]);
    check_expand("{1..-02}", &["001", "000", "-01", "-02"]);
    check_expand("{-01..3..2}", &["-01", "001", "003"]);
    check_expand("{1..1}", &["1"]);
    check_expand("{0..2}", &["0", "1", "2"]);
    check_expand("{-0..1}", &["0", "1"]);
    check_expand("{0..-0}", &["0"]);
    check_expand("x{1..2..99999999999999999999}y", &["x1y"]);
    check_expand(
        "shards/data-{000000..000003}.tar",
        &[
            "shards/data-000000.tar",
            "shards/data-000001.tar",
            "shards/data-000002.tar",
            "shards/data-000003.tar",
        ],
    );
    assert_eq!(brace_expand("{00..10}").unwrap()[..2], ["00", "01"]);
    assert_eq!(brace_expand("{01..1000}").unwrap()[0], "0001");
}

#[test]
fn expands_letter_ranges() {
    check_expand("{a..e}", &["a", "b", "c", "d", "e"]);
    check_expand("{a..e..2}", &["a", "c", "e"]);
    check_expand("{e..a}", &["e", "d", "c", "b", "a"]);
    check_expand("{e..a..2}", &["e", "c", "a"]);
    check_expand("{a..b..0}", &["a", "b"]);
    check_expand("{Z..a}", &["Z", "a"]);
    check_expand("{a..Z}", &["a", "Z"]);
    check_expand("{1..a}", &["{1..a}"]);
    check_expand("{a..1}", &["{a..1}"]);
    check_expand("{a..a}", &["a"]);
    let upward = brace_expand("{A..z}").unwrap();
    assert_eq!(upward.len(), 52);
    let downward = brace_expand("{z..A}").unwrap();
    assert_eq!(downward, upward.into_iter().rev().collect::<Vec<_>>());
}

#[test]
fn expands_escapes() {
    check_expand("\\{1,2\\}", &["{1,2}"]);
    check_expand("{1\\,2}", &["{1,2}"]);
    check_expand("\\}{1,2}", &["}1", "}2"]);
    check_expand("{1,2}\\{", &["1{", "2{"]);
    check_expand("{\\,1,2}", &[",1", "2"]);
    check_expand("{1,2\\,}", &["1", "2,"]);
    check_expand("\\\\{1,2}", &["\\1", "\\2"]);
    check_expand("\\{1..2\\}", &["{1..2}"]);
    check_expand("a\\", &["a\\"]);
}

#[test]
fn unbalanced_braces_are_errors() {
    for pattern in ["{{1,2}", "{1,2}}", "{1},2}", "{1,{2}", "{}1,2}", "{1,2{}", "}{1,2}", "{1,2}{"]
    {
        match brace_expand(pattern) {
            Err(Error::BadPattern { pattern: p, reason }) => {
                assert_eq!(p, pattern);
                assert!(reason.contains("unbalanced"), "{reason}");
            }
            other => panic!("{pattern:?}: {other:?}"),
        }
    }
    assert!(matches!(brace_expand("{0..99999999}"), Err(Error::BadPattern { .. })));
}

#[test]
fn collapses_runs_in_order() {
    check_collapse(
        &[
            "shards/data-000000.tar",
            "shards/data-000001.tar",
            "shards/data-000002.tar",
            "shards/data-000003.tar",
        ],
        &["shards/data-{000000..000003}.tar"],
    );
    check_collapse(&["f001.tar", "f003.tar", "f002.tar"], &["f001.tar", "f003.tar", "f002.tar"]);
    check_collapse(
        &["python2", "python3.1", "python3.2", "python3.5"],
        &["python2", "python3.{1..2}", "python3.5"],
    );
    check_collapse(
        &["a2b3c", "a4b3c", "a3b3c", "a4b2c", "a5b2c"],
        &["a2b3c", "a4b3c", "a3b3c", "a{4..5}b2c"],
    );
    check_collapse(&["p0/s9.tar", "p0/s10.tar"], &["p0/s9.tar", "p0/s10.tar"]);
    check_collapse(&["p09/s.tar", "p10/s.tar", "p11/s.tar"], &["p{09..11}/s.tar"]);
    check_collapse(
        &["p0/s1.tar", "p0/s2.tar", "p1/s3.tar", "p1/s4.tar"],
        &["p0/s{1..2}.tar", "p1/s{3..4}.tar"],
    );
    check_collapse(&["x.tar", "y.tar"], &["x.tar", "y.tar"]);
    check_collapse(&["a1", "a1"], &["a1", "a1"]);
    check_collapse(&[], &[]);
    // Where the reference would write `a01b{1..2}` (which expands to a name not in the input), the
    // names stay apart.
    check_collapse(&["a01b1", "a1b2"], &["a01b1", "a1b2"]);
}

/// Names built from a small alphabet of literals and zero-padded numbers, so that runs, near-runs,
/// width changes and repeated values all occur.
fn name_strategy() -> impl Strategy<Value = String> {
    let field = (0u32..14, 0usize..4).prop_map(|(v, pad)| format!("{v:0pad$}"));
    let lit = prop::sample::select(vec!["", "a", "-", "/", ".tar", "x_", "é"]);
    prop::collection::vec((lit, field), 0..4).prop_map(|parts| {
        parts.into_iter().map(|(lit, field)| format!("{lit}{field}")).collect::<String>()
    })
}

proptest! {
    #[test]
    fn collapse_then_expand_is_identity(names in prop::collection::vec(name_strategy(), 0..40)) {
        let collapsed = collapse(&names);
        prop_assert!(collapsed.len() <= names.len());
        let mut expanded = Vec::new();
        for pattern in &collapsed {
            expanded.extend(brace_expand(pattern).unwrap());
        }
        prop_assert_eq!(expanded, names);
    }

    #[test]
    fn consecutive_shards_collapse_to_one_pattern(start in 0u64..1000, n in 2usize..200, width in 1usize..8) {
        let names: Vec<String> = (0..n as u64).map(|i| format!("part/{:0width$}.tar", start + i)).collect();
        let same_width = names.iter().all(|s| s.len() == names[0].len());
        let collapsed = collapse(&names);
        if same_width {
            prop_assert_eq!(collapsed.len(), 1);
        }
        let expanded: Vec<String> = collapsed.iter().flat_map(|p| brace_expand(p).unwrap()).collect();
        prop_assert_eq!(expanded, names);
    }
}

#[test]
fn reads_and_rewrites_the_reference_split_byte_for_byte() {
    let path = fixture().join(".nv-meta/split.yaml");
    let config = read_split_config(&path).unwrap();
    assert_eq!(
        config.split_parts,
        [("train".to_owned(), strings(&["shards/data-{000000..000003}.tar"]))]
    );
    assert!(config.exclude.is_empty());
    let want = std::fs::read(&path).unwrap();
    assert_eq!(split_config_bytes(&config, "split.yaml").unwrap().as_bytes(), want.as_slice());
    // What prepare builds from the discovered shard list collapses to the same file.
    let shards: Vec<String> = (0..4).map(|i| format!("shards/data-{i:06}.tar")).collect();
    let built = SplitConfig {
        split_parts: vec![("train".to_owned(), collapse(&shards))],
        exclude: Vec::new(),
    };
    assert_eq!(built, config);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("split.yaml");
    write_split_config(&out, &built).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), want);
}

#[test]
fn resolves_the_reference_split() {
    let (path, config) = read_dataset_split(&fixture(), None).unwrap();
    assert!(path.ends_with(".nv-meta/split.yaml"));
    let info = crate::info::read_dataset_info(&fixture()).unwrap();
    let resolved = config.resolve(&path, "train", &info.shard_counts).unwrap();
    let names: Vec<&str> = resolved.shards.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "shards/data-000000.tar",
            "shards/data-000001.tar",
            "shards/data-000002.tar",
            "shards/data-000003.tar"
        ]
    );
    assert!(resolved.shards.iter().all(|s| s.count == 50));
    assert!(resolved.sample_excludes.is_empty());
}

#[test]
fn resolve_applies_excludes_and_keeps_split_order() {
    let config = SplitConfig {
        split_parts: vec![
            ("train".to_owned(), strings(&["s{3..0}.tar", "s1.tar"])),
            ("val".to_owned(), strings(&["s{0..1}.tar"])),
        ],
        exclude: strings(&["s2.tar", "s{0,1}.tar/000{1..2}", "other/path", "s9.tar"]),
    };
    let counts = counts(&["s0.tar", "s1.tar", "s2.tar", "s3.tar"]);
    let resolved = config.resolve(Path::new("split.yaml"), "train", &counts).unwrap();
    let shards: Vec<(&str, u64)> =
        resolved.shards.iter().map(|s| (s.name.as_str(), s.count)).collect();
    assert_eq!(shards, [("s3.tar", 13), ("s1.tar", 11), ("s0.tar", 10), ("s1.tar", 11)]);
    assert_eq!(resolved.split_part_files, ["s3.tar", "s2.tar", "s1.tar", "s0.tar", "s1.tar"]);
    let excludes: Vec<&str> = resolved.sample_excludes.iter().map(String::as_str).collect();
    assert_eq!(
        excludes,
        ["other/path", "s0.tar/0001", "s0.tar/0002", "s1.tar/0001", "s1.tar/0002"]
    );
}

#[test]
fn resolve_errors_name_the_split_file() {
    let path = Path::new("ds/.nv-meta/split.yaml");
    let config = SplitConfig {
        split_parts: vec![
            ("train".to_owned(), strings(&["a.tar", "b.tar"])),
            ("val".to_owned(), strings(&["a.tar"])),
        ],
        exclude: strings(&["a.tar"]),
    };
    let counts = counts(&["a.tar", "b.tar"]);
    match config.resolve(path, "test", &counts) {
        Err(Error::UnknownSplitPart { path: p, split_part, defined }) => {
            assert_eq!(
                (p.as_path(), split_part.as_str(), defined.as_str()),
                (path, "test", "train, val")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(config.resolve(path, "val", &counts), Err(Error::EmptySplit { .. })));
    let err = config.resolve(path, "train", &counts[..1]).unwrap_err();
    assert!(matches!(&err, Error::UnknownShard { shard, .. } if shard == "b.tar"), "{err:?}");
    assert!(err.to_string().contains("ds/.nv-meta/split.yaml"), "{err}");
    let bad = SplitConfig {
        split_parts: vec![("train".to_owned(), strings(&["{a.tar"]))],
        exclude: Vec::new(),
    };
    let err = bad.resolve(path, "train", &counts).unwrap_err().to_string();
    assert!(err.contains("split.yaml") && err.contains("unbalanced"), "{err}");
}

#[test]
fn split_files_are_parsed_strictly() {
    let check_bad = |text: &str, needle: &str| {
        let value = crate::yaml::parse_yaml(text, Path::new("split.yaml")).unwrap();
        let err = SplitConfig::from_value(&value, Path::new("split.yaml")).unwrap_err().to_string();
        assert!(err.contains(needle) && err.contains("split.yaml"), "{text}: {err}");
    };
    check_bad("exclude: []\n", "missing key \"split_parts\"");
    check_bad("split_parts: [a]\n", "split_parts: expected a mapping");
    check_bad("split_parts:\n  train: a.tar\n", "split_parts.train: expected a list");
    check_bad("split_parts:\n  train: [1]\n", "split_parts.train[0]: expected a string");
    check_bad("split_parts: {}\nexclude: a\n", "exclude: expected a list");
    check_bad("split_parts: {}\nother: 1\n", "unknown key \"other\"");
    // `exclude` may be left out.
    let value =
        crate::yaml::parse_yaml("split_parts:\n  train: [a.tar]\n", Path::new("s.yaml")).unwrap();
    assert_eq!(
        SplitConfig::from_value(&value, Path::new("s.yaml")).unwrap().exclude,
        Vec::<String>::new()
    );
}

#[test]
fn split_json_is_written_and_used_as_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join(crate::NV_META);
    std::fs::create_dir(&meta).unwrap();
    let config = SplitConfig {
        split_parts: vec![
            ("train".to_owned(), strings(&["a", "b"])),
            ("val".to_owned(), Vec::new()),
        ],
        exclude: Vec::new(),
    };
    write_split_config(&meta.join(SPLIT_JSON), &config).unwrap();
    assert_eq!(
        std::fs::read_to_string(meta.join(SPLIT_JSON)).unwrap(),
        "{\n  \"split_parts\": {\n    \"train\": [\n      \"a\",\n      \"b\"\n    ],\n    \"val\": []\n  },\n  \
         \"exclude\": []\n}"
    );
    let (path, read) = read_dataset_split(dir.path(), None).unwrap();
    assert_eq!((path, read), (meta.join(SPLIT_JSON), config.clone()));
    // A custom name has no fallback.
    assert!(matches!(read_dataset_split(dir.path(), Some("split2.yaml")), Err(Error::Io { .. })));
    assert!(matches!(write_split_config(&meta.join("split.txt"), &config), Err(Error::Config(_))));
    // The YAML form of the same config, as PyYAML writes it.
    assert_eq!(
        split_config_bytes(&config, "split.yaml").unwrap(),
        "split_parts:\n  train:\n  - a\n  - b\n  val: []\nexclude: []\n"
    );
}
