//! Golden tests against outputs of the Python reference (megatron-energon 7.4.1): join indexes
//! that `energon prepare` wrote, and sample orders its loader yielded (`tests/data/`).
#![allow(clippy::unwrap_used)]

use std::{
    fs,
    path::{Path, PathBuf},
};

use energon_index::{
    join_index::JoinIndex,
    prepare::{PrepareOptions, prepare_dataset},
};
use energon_mix::{
    LeafKind, Metadataset, ResolveOptions,
    join::{JoinStatus, JoinedDataset, join_index_location},
    prepare_metadataset,
};
use energon_tests::WdsSpec;

/// The reference-prepared fixture (prepared by the reference).
fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A generated WebDataset (`make-wds` content), prepared with everything in `train`.
fn generated(root: &Path, shards: usize, per_shard: usize, seed: u64) {
    let spec = WdsSpec { shards, per_shard, seed, ..WdsSpec::default() };
    energon_tests::write_wds(root, &spec).unwrap();
    let options = PrepareOptions::default().num_workers(1);
    prepare_dataset(root, &options, &|_| {}).unwrap();
}

/// The datasets the reference joined: `ref` (the fixture), `ref2` (one sample excluded), `ref3`
/// (one shard excluded), `b` (the same keys in 5 shards of 40) and `c` (only keys 0..90).
fn join_datasets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["ref", "ref2", "ref3"] {
        energon_tests::copy_dir(&fixture(), &dir.path().join(name)).unwrap();
    }
    let split = |exclude: &str| {
        format!(
            "split_parts:\n  train:\n  - shards/data-{{000000..000003}}.tar\nexclude:\n- {exclude}\n"
        )
    };
    fs::write(
        dir.path().join("ref2/.nv-meta/split.yaml"),
        split("shards/data-000001.tar/00000060"),
    )
    .unwrap();
    fs::write(dir.path().join("ref3/.nv-meta/split.yaml"), split("shards/data-000002.tar"))
        .unwrap();
    generated(&dir.path().join("b"), 5, 40, 7);
    generated(&dir.path().join("c"), 3, 30, 9);
    fs::write(
        dir.path().join("join.yaml"),
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    join:\n      \
         - path: ref\n      - path: b\n    joiner:\n      __module__: megatron.energon\n      \
         __class__: CaptioningSample\n  self:\n    join:\n      a: {path: ref, split_part: train}\n      \
         b: {path: ref, split_part: train, nonmatch: none}\n    joiner:\n      __module__: \
         megatron.energon\n      __class__: CaptioningSample\n",
    )
    .unwrap();
    let joiner = "    joiner: {__module__: megatron.energon, __class__: CaptioningSample}\n";
    fs::write(
        dir.path().join("join2.yaml"),
        format!(
            "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  skip:\n    join:\n      \
             - {{path: ref, split_part: train}}\n      - {{path: c, split_part: train, nonmatch: \
             skip}}\n{joiner}  none:\n    join:\n      - {{path: ref, split_part: train}}\n      - \
             {{path: c, split_part: train, nonmatch: none}}\n{joiner}  excl:\n    join:\n      - \
             {{path: ref2, split_part: train}}\n      - {{path: ref3, split_part: train, nonmatch: \
             none}}\n{joiner}"
        ),
    )
    .unwrap();
    dir
}

/// The rows of a join index as the golden files write them.
fn rows(index: &JoinIndex) -> Vec<String> {
    (0..index.len())
        .map(|r| {
            index
                .row(r)
                .unwrap()
                .iter()
                .map(|e| match e {
                    Some(e) => format!("{} {} {}", e.shard_idx, e.byte_offset, e.byte_size),
                    None => "-1 -1 -1".to_owned(),
                })
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect()
}

/// The golden rows and the reference's file name.
fn golden(name: &str) -> (String, Vec<String>) {
    let text = fs::read_to_string(data(name)).unwrap();
    let file_name = text.lines().find_map(|l| l.strip_prefix("# file name: ")).unwrap().to_owned();
    (file_name, text.lines().filter(|l| !l.starts_with('#')).map(str::to_owned).collect())
}

fn join_index_of(mds: &Path, split: &str) -> PathBuf {
    let resolved =
        Metadataset::load(mds).unwrap().resolve(split, &ResolveOptions::default()).unwrap();
    let LeafKind::Joined(spec) = &resolved.leaves[0].kind else { panic!() };
    join_index_location(spec).unwrap().0
}

#[test]
fn join_indexes_match_the_reference_byte_for_byte() {
    let dir = join_datasets();
    let report = prepare_metadataset(&dir.path().join("join.yaml")).unwrap();
    assert_eq!(report.joins.len(), 2);
    assert!(report.joins.iter().all(|j| matches!(j.status, JoinStatus::Built(_))));
    let report2 = prepare_metadataset(&dir.path().join("join2.yaml")).unwrap();
    let lines = report2.lines();
    assert!(
        lines.contains(&"Joined 90/200 samples, skipped 110 samples due to join".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.contains(
            &"Non-matching samples filled with None for each dataset: [0, 110]".to_owned()
        )
    );
    assert!(lines.contains(&"Joined all 199 samples".to_owned()), "{lines:?}");

    for (mds, split, golden_file, same_name) in [
        ("join.yaml", "train", "join-ref-b.txt", false),
        ("join.yaml", "self", "join-ref-self.txt", true),
        ("join2.yaml", "skip", "join-ref-c-skip.txt", false),
        ("join2.yaml", "none", "join-ref-c-none.txt", false),
        ("join2.yaml", "excl", "join-ref2-ref3-excludes.txt", true),
    ] {
        let path = join_index_of(&dir.path().join(mds), split);
        let (name, expected) = golden(golden_file);
        if same_name {
            // Only the fixture's index.uuid is involved: the name is the reference's.
            assert_eq!(path.file_name().unwrap().to_str().unwrap(), name, "{split}");
        }
        let index = JoinIndex::open(&path).unwrap();
        assert_eq!(rows(&index), expected, "{mds} {split}");
    }

    // A second prepare finds everything up to date and removes nothing.
    let again = prepare_metadataset(&dir.path().join("join.yaml")).unwrap();
    assert!(again.joins.iter().all(|j| j.status == JoinStatus::UpToDate));
    assert!(again.removed.is_empty());
}

#[test]
fn joined_samples_combine_the_samples_of_one_key() {
    let dir = join_datasets();
    prepare_metadataset(&dir.path().join("join2.yaml")).unwrap();
    let mds = Metadataset::load(&dir.path().join("join2.yaml")).unwrap();
    // `c` has no dataset config (every part is read); `ref3`'s field map names `jpg` and `txt`,
    // and only those are read, as the reference reads them (not its `json`).
    for (split, rows, missing, parts) in
        [("skip", 90, 0, 3), ("none", 200, 110, 3), ("excl", 199, 50, 2)]
    {
        let resolved = mds.resolve(split, &ResolveOptions::default()).unwrap();
        let LeafKind::Joined(spec) = &resolved.leaves[0].kind else { panic!() };
        let joined = JoinedDataset::open(spec).unwrap();
        assert_eq!(joined.n_rows(), rows, "{split}");
        let mut n_missing = 0;
        for row in 0..rows {
            let sample = joined.read(row).unwrap().unwrap();
            let samples: Vec<_> = sample.samples().collect();
            assert_eq!(samples.len(), 2);
            match samples[1] {
                Some(secondary) => {
                    assert_eq!(secondary.key, sample.key(), "{split} row {row}");
                    assert_eq!(secondary.parts.len(), parts, "{split}");
                }
                None => n_missing += 1,
            }
        }
        assert_eq!(n_missing, missing, "{split}");
    }
    // Merged, the parts of the secondary replace the primary's parts of the same name.
    let resolved = mds.resolve("none", &ResolveOptions::default()).unwrap();
    let LeafKind::Joined(spec) = &resolved.leaves[0].kind else { panic!() };
    let joined = JoinedDataset::open(spec).unwrap();
    let sample = joined.read(0).unwrap().unwrap();
    let merged = sample.merged();
    assert_eq!(merged.key, sample.key());
    let secondary = sample.samples().nth(1).unwrap().unwrap();
    let names: Vec<&str> = merged.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["jpg", "txt", "json"]);
    assert_eq!(merged.part("txt"), secondary.part("txt"));
    assert_ne!(merged.part("txt"), sample.primary().part("txt"));
    let missing = (0..joined.n_rows())
        .find(|&r| joined.read(r).unwrap().unwrap().samples().nth(1).unwrap().is_none());
    let lone = joined.read(missing.unwrap()).unwrap().unwrap();
    assert_eq!(lone.merged(), *lone.primary());

    // The excluded sample of ref2 is not in the join.
    let resolved = mds.resolve("excl", &ResolveOptions::default()).unwrap();
    let LeafKind::Joined(spec) = &resolved.leaves[0].kind else { panic!() };
    let joined = JoinedDataset::open(spec).unwrap();
    let keys: Vec<String> =
        (0..joined.n_rows()).map(|r| joined.read(r).unwrap().unwrap().key().to_owned()).collect();
    assert!(!keys.contains(&"00000060".to_owned()));
    assert_eq!(joined.primary_len(), 200);
}

#[test]
fn stale_and_missing_join_indexes_are_reported() {
    let dir = join_datasets();
    let mds_path = dir.path().join("join.yaml");
    let mds = Metadataset::load(&mds_path).unwrap();
    let resolved = mds.resolve("train", &ResolveOptions::default()).unwrap();
    let LeafKind::Joined(spec) = &resolved.leaves[0].kind else { panic!() };
    let err = JoinedDataset::open(spec).unwrap_err();
    assert!(err.to_string().contains("missing: run `energon prepare"), "{err}");

    prepare_metadataset(&mds_path).unwrap();
    // Re-preparing a dataset gives it a new index.uuid: the old index is no longer found, and
    // the next prepare removes it.
    let old = join_index_location(spec).unwrap().0;
    energon_index::sqlite::write_index_uuid(&dir.path().join("b/.nv-meta")).unwrap();
    assert!(JoinedDataset::open(spec).is_err());
    let report = prepare_metadataset(&mds_path).unwrap();
    assert_eq!(report.removed, [old]);
    assert!(JoinedDataset::open(spec).is_ok());
}
