//! Tests of dataset classification, shard discovery and split assignment.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn touch(root: &Path, rel: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, b"").unwrap();
}

fn check_ratio(arg: &str, want: [f64; 3]) {
    assert_eq!(parse_split_ratio(arg).unwrap(), want, "{arg:?}");
}

/// Splits `n` shards by `ratio` (no shuffle) and compares the split sizes.
fn check_ratio_sizes(n: usize, ratio: [f64; 3], want: [usize; 3]) {
    let shards: Vec<String> = (0..n).map(|i| format!("s{i:04}.tar")).collect();
    let split = split_by_ratio(&shards, ratio, false).unwrap();
    let names: Vec<&str> = split.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, RATIO_SPLIT_NAMES);
    let sizes: Vec<usize> = split.iter().map(|(_, s)| s.len()).collect();
    assert_eq!(sizes, want, "{n} shards, ratio {ratio:?}");
    let joined: Vec<String> = split.into_iter().flat_map(|(_, s)| s).collect();
    assert_eq!(joined[..], shards[..joined.len()]);
}

#[test]
fn classifies_paths_like_energon() {
    assert_eq!(classify(&fixture()).unwrap(), DatasetKind::WebDataset);
    assert_eq!(classify(&fixture().join("jsonl/data.jsonl")).unwrap(), DatasetKind::Jsonl);
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), "meta.yaml");
    touch(dir.path(), "notes.txt");
    touch(dir.path(), "media/.nv-meta/index.sqlite");
    touch(dir.path(), "legacy/.nv-meta/.info.yaml");
    assert_eq!(classify(&dir.path().join("meta.yaml")).unwrap(), DatasetKind::Metadataset);
    assert_eq!(classify(&dir.path().join("media")).unwrap(), DatasetKind::Filesystem);
    assert_eq!(classify(&dir.path().join("legacy")).unwrap(), DatasetKind::WebDataset);
    assert_eq!(classify(dir.path()).unwrap(), DatasetKind::Folder);
    for bad in ["notes.txt", "missing"] {
        let err = classify(&dir.path().join(bad)).unwrap_err();
        assert!(matches!(err, Error::NotADataset { .. }), "{bad}: {err:?}");
    }
}

#[test]
fn finds_the_reference_shards_in_info_order() {
    let shards = discover_shards(&fixture()).unwrap();
    let info = crate::info::read_dataset_info(&fixture()).unwrap();
    assert_eq!(shards, info.shard_names().collect::<Vec<_>>());
}

#[test]
fn sorts_by_path_components_and_searches_like_pathlib() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for rel in [
        "a/b.tar",
        "a-b.tar",
        "a.tar",
        ".hidden/x.tar",
        "z.tgz",
        "sub/deeper/c.tar",
        "readme.txt",
        "x.tar.idx",
    ] {
        touch(root, rel);
    }
    fs::create_dir(root.join("dir.tar")).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("sub", root.join("link")).unwrap();
        std::os::unix::fs::symlink("a.tar", root.join("l.tar")).unwrap();
    }
    let mut want = strings(&[".hidden/x.tar", "a/b.tar", "a-b.tar", "a.tar"]);
    if cfg!(unix) {
        want.push("l.tar".to_owned());
    }
    want.extend(strings(&["sub/deeper/c.tar", "z.tgz"]));
    // Python 3.11 pathlib gives the same list plus the folder `dir.tar`, which we leave out.
    assert_eq!(discover_shards(root).unwrap(), want);
    assert!(matches!(discover_shards(&root.join("missing")), Err(Error::Io { .. })));
}

#[test]
fn exclude_uses_search_semantics() {
    let shards = strings(&["a/x-1.tar", "a/y-2.tar", "b/x-3.tar"]);
    assert_eq!(apply_exclude(&shards, "x-").unwrap(), ["a/y-2.tar"]);
    assert_eq!(apply_exclude(&shards, "^b/").unwrap(), ["a/x-1.tar", "a/y-2.tar"]);
    assert_eq!(apply_exclude(&shards, "nothing").unwrap(), shards);
    assert!(matches!(apply_exclude(&shards, "("), Err(Error::Config(_))));
    assert!(matches!(apply_exclude(&shards, "(?=x)"), Err(Error::Config(_))));
}

#[test]
fn split_patterns_match_at_the_start_only() {
    let shards =
        strings(&["train/0.tar", "train/1.tar", "val/0.tar", "extra/train/2.tar", "test/0.tar"]);
    let patterns = vec![
        parse_split_part("train:train/").unwrap(),
        parse_split_part("val:{val,test}/.*").unwrap(),
        parse_split_part("all:.*").unwrap(),
        parse_split_part("none:.*\\.tgz").unwrap(),
        parse_split_part("val:val/").unwrap(),
    ];
    let split = split_by_patterns(&shards, &patterns).unwrap();
    let want: Vec<(String, Vec<String>)> = vec![
        ("train".into(), strings(&["train/0.tar", "train/1.tar"])),
        ("val".into(), strings(&["val/0.tar"])),
        ("all".into(), shards.clone()),
        ("none".into(), Vec::new()),
    ];
    assert_eq!(split, want);
    assert_eq!(parse_split_part("a:b:c").unwrap(), ("a".to_owned(), "b:c".to_owned()));
    assert!(matches!(parse_split_part("nocolon"), Err(Error::Config(_))));
    assert!(matches!(
        split_by_patterns(&shards, &[("x".into(), "[".into())]),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        split_by_patterns(&shards, &[("x".into(), "{a".into())]),
        Err(Error::BadPattern { .. })
    ));
}

#[test]
fn parses_split_ratios() {
    check_ratio("0.8,0.1,0.1", [0.8, 0.1, 0.1]);
    check_ratio("8,1,1", [8.0, 1.0, 1.0]);
    check_ratio(" 0.5, 0.2 ,0.3 ", [0.5, 0.2, 0.3]);
    check_ratio("1,0,0", [1.0, 0.0, 0.0]);
    check_ratio("1e1,5.,.5", [10.0, 5.0, 0.5]);
    for bad in ["", "1,1", "1,1,1,1", "a,b,c", "1,,1", "-1,1,1", "inf,1,1", "nan,1,1", "0,0,0"] {
        assert!(matches!(parse_split_ratio(bad), Err(Error::Config(_))), "{bad:?}");
    }
}

#[test]
fn ratio_splits_truncate_like_python() {
    check_ratio_sizes(10, [0.8, 0.1, 0.1], [8, 1, 1]);
    check_ratio_sizes(7, [8.0, 1.0, 1.0], [5, 1, 1]);
    check_ratio_sizes(3, [1.0, 1.0, 1.0], [1, 1, 1]);
    check_ratio_sizes(4, [1.0, 0.0, 0.0], [4, 0, 0]);
    check_ratio_sizes(0, [1.0, 1.0, 1.0], [0, 0, 0]);
    // The reference's quirk: 0.1/0.4 + 0.0 + 0.3/0.4 sums to 0.9999999999999999, so the last
    // shard lands in no split.
    check_ratio_sizes(10, [0.1, 0.0, 0.3], [2, 0, 7]);
    check_ratio_sizes(1000, [0.1, 0.0, 0.3], [250, 0, 749]);
    assert!(matches!(split_by_ratio(&[], [0.0, 0.0, 0.0], false), Err(Error::Config(_))));
}

#[test]
fn shuffled_ratio_split_matches_python_random_42() {
    let shards: Vec<String> = (0..10).map(|i| format!("s{i:02}.tar")).collect();
    let split = split_by_ratio(&shards, [0.8, 0.1, 0.1], true).unwrap();
    // Python: l = names[:]; random.Random(42).shuffle(l)
    let order = [
        "s07.tar", "s03.tar", "s02.tar", "s08.tar", "s05.tar", "s06.tar", "s09.tar", "s04.tar",
        "s00.tar", "s01.tar",
    ];
    assert_eq!(split[0].1, order[..8]);
    assert_eq!(split[1].1, order[8..9]);
    assert_eq!(split[2].1, order[9..]);
}

proptest! {
    #[test]
    fn ratio_splits_partition_a_prefix_in_order(
        n in 0usize..300,
        ratio in prop::array::uniform3(0u32..50),
        shuffle in any::<bool>(),
    ) {
        prop_assume!(ratio.iter().any(|&r| r > 0));
        let ratio = ratio.map(f64::from);
        let shards: Vec<String> = (0..n).map(|i| format!("s{i}.tar")).collect();
        let split = split_by_ratio(&shards, ratio, shuffle).unwrap();
        prop_assert_eq!(split.len(), 3);
        let joined: Vec<String> = split.iter().flat_map(|(_, s)| s.iter().cloned()).collect();
        // Every shard is in at most one split, in the (possibly shuffled) list order; at most the
        // last one is lost to float truncation.
        let mut order = shards;
        if shuffle {
            PyRandom::new(42).shuffle(&mut order);
        }
        prop_assert!(joined.len() == n || joined.len() + 1 == n);
        prop_assert_eq!(&joined[..], &order[..joined.len()]);
        // Each split holds exactly int(n * cumulative) - previous end shards.
        let total: f64 = ratio.iter().sum();
        let mut cumulative = 0.0;
        let mut prev = 0usize;
        for (k, (_, members)) in split.iter().enumerate() {
            cumulative += ratio[k] / total;
            let end = (n as f64 * cumulative) as usize;
            prop_assert_eq!(members.len(), end - prev);
            prev = end;
        }
    }

    #[test]
    fn pattern_splits_keep_order(mask in prop::collection::vec(any::<bool>(), 0..60)) {
        let shards: Vec<String> =
            mask.iter().enumerate().map(|(i, &a)| format!("{}/{i}.tar", if a { "a" } else { "b" })).collect();
        let split = split_by_patterns(&shards, &[("a".into(), "a/".into()), ("b".into(), "b".into())]).unwrap();
        let a: Vec<&String> = shards.iter().filter(|s| s.starts_with("a/")).collect();
        let b: Vec<&String> = shards.iter().filter(|s| s.starts_with("b/")).collect();
        prop_assert_eq!(split[0].1.iter().collect::<Vec<_>>(), a);
        prop_assert_eq!(split[1].1.iter().collect::<Vec<_>>(), b);
    }
}
