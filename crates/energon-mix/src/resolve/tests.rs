//! Resolution tests against values worked out by hand from the reference's rules.

use std::path::{Path, PathBuf};

use energon_dist::DatasetSubset;
use serde_json::{Map, Value, json};

use super::*;
use crate::{
    grammar::{Joiner, Nonmatch, Repetitions},
    testutil::{ref_small, text_dataset, write},
};

const V2: &str = "__module__: megatron.energon\n__class__: MetadatasetV2\n";

fn map(value: Value) -> Map<String, Value> {
    value.as_object().unwrap().clone()
}

/// A folder with three prepared text datasets of 55 samples (shards of 10): `ds1` (keys 0..55),
/// `ds2` (100..155), `ds3` (200..255).
fn datasets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    text_dataset(&dir.path().join("ds1"), 0..55, 10);
    text_dataset(&dir.path().join("ds2"), 100..155, 10);
    text_dataset(&dir.path().join("ds3"), 200..255, 10);
    dir
}

fn resolve(path: &Path, split: &str) -> Result<ResolvedSplit> {
    Metadataset::load(path)?.resolve(split, &ResolveOptions::default())
}

fn names(split: &ResolvedSplit) -> Vec<String> {
    split
        .leaves
        .iter()
        .map(|l| l.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn weights(split: &ResolvedSplit) -> Vec<f64> {
    split.leaves.iter().map(|l| l.weight.unwrap()).collect()
}

/// The reference's `test_metadataset.py` files: a V1 metadataset and a V1 file nesting it twice.
fn reference_v1_files(dir: &Path) -> PathBuf {
    write(
        dir,
        "metadataset.yaml",
        "__module__: megatron.energon\n__class__: Metadataset\nsplits:\n  train:\n    datasets:\n      \
         - weight: 1\n        path: ds1\n        subflavor: ds1\n        subflavors:\n          \
         source: metadataset.yaml\n          number: 43\n          mds: mds\n        \
         shuffle_over_epochs_multiplier: 3\n      - weight: 1\n        path: ds2\n        \
         subflavor: ds2\n        subflavors:\n          source: metadataset.yaml\n          \
         number: 44\n          mds: mds\n  val:\n    datasets:\n      - weight: 1\n        path: \
         ds1\n        split_part: train\n      - weight: 1\n        path: ds2\n        split_part: \
         train\n",
    );
    write(
        dir,
        "nested_metadataset.yaml",
        "splits:\n  train:\n    datasets:\n      - weight: 4\n        path: ./metadataset.yaml\n        \
         split_part: train\n        subflavor: train\n        subflavors:\n          source: \
         nested_metadataset.yaml\n          mds: nested_train\n      - path: ./metadataset.yaml\n        \
         split_part: val\n        subflavors:\n          source: nested_metadataset.yaml\n          \
         mds: nested_val\n",
    )
}

#[test]
fn the_reference_nested_v1_metadataset_resolves_as_its_test_pins() {
    let dir = datasets();
    let nested = reference_v1_files(dir.path());
    let split = resolve(&nested, "train").unwrap();
    assert_eq!(split.mode, BlendMode::DatasetWeight);
    // test_metadataset.py::test_nested_metadataset
    assert_eq!(weights(&split), [0.4, 0.4, 0.1, 0.1]);
    assert_eq!(names(&split), ["ds1", "ds2", "ds1", "ds2"]);
    assert!(split.leaves.iter().all(|l| l.split_part == "train" && l.kind == LeafKind::WebDataset));
    let dataset_yaml = map(json!({"source": "dataset.yaml", "dataset.yaml": true, "number": 42}));
    let sample_subflavors: Vec<String> = split
        .leaves
        .iter()
        .map(|l| serde_json::to_string(&l.sample_subflavors(Some(&dataset_yaml))).unwrap())
        .collect();
    // Same values and key order as the reference's subflavors (dicts compared as tuples there).
    assert_eq!(
        sample_subflavors,
        [
            r#"{"source":"nested_metadataset.yaml","dataset.yaml":true,"number":43,"__subflavor__":"train","mds":"nested_train"}"#,
            r#"{"source":"nested_metadataset.yaml","dataset.yaml":true,"number":44,"__subflavor__":"train","mds":"nested_train"}"#,
            r#"{"source":"nested_metadataset.yaml","dataset.yaml":true,"number":42,"mds":"nested_val"}"#,
            r#"{"source":"nested_metadataset.yaml","dataset.yaml":true,"number":42,"mds":"nested_val"}"#,
        ]
    );
    // test_metadataset.py's loader config: multipliers 3 x 2 and 1 x 2 with an outer 2.
    let options = ResolveOptions { shuffle_over_epochs_multiplier: Some(2), subflavors: None };
    let mds = Metadataset::load(&dir.path().join("metadataset.yaml")).unwrap();
    let soe: Vec<_> = mds
        .resolve("train", &options)
        .unwrap()
        .leaves
        .iter()
        .map(|l| l.shuffle_over_epochs)
        .collect();
    assert_eq!(soe, [Some(6), Some(2)]);
}

#[test]
fn weights_are_normalized_per_level_and_multiplied_down_in_doubles() {
    let dir = datasets();
    let flat = write(
        dir.path(),
        "flat.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: ds1}}\n      - \
             {{weight: 2, path: ds2}}\n      - {{weight: 5, path: ds3}}\n"
        ),
    );
    assert_eq!(weights(&resolve(&flat, "train").unwrap()), [0.125, 0.25, 0.625]);
    write(
        dir.path(),
        "inner.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{weight: 0.3, path: ds1}}\n      - \
             {{weight: 0.7, path: ds2}}\n"
        ),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{weight: 3, path: inner.yaml}}\n      - \
             {{path: ds3}}\n"
        ),
    );
    // (1.0 * 0.3 / 1.0) * 3 / 4 rounds to 0.22499999999999998, not 0.225.
    let split = resolve(&outer, "train").unwrap();
    assert_eq!(weights(&split), [0.22499999999999998, 0.5249999999999999, 0.25]);
    assert_eq!(names(&split), ["ds1", "ds2", "ds3"]);
}

#[test]
fn repetitions_multiply_down_and_integers_stay_integers() {
    let dir = datasets();
    write(
        dir.path(),
        "inner.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend_epochized:\n      - {{repetitions: 3, path: ds1}}\n      \
             - {{repetitions: 0.5, path: ds2}}\n"
        ),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend_epochized:\n      - {{repetitions: 2, path: \
             inner.yaml}}\n      - {{path: ds3}}\n      - {{repetitions: 1.5, path: ds1}}\n"
        ),
    );
    let split = resolve(&outer, "train").unwrap();
    assert_eq!(split.mode, BlendMode::SampleRepetitions);
    let reps: Vec<_> = split.leaves.iter().map(|l| l.repetitions.unwrap()).collect();
    assert_eq!(
        reps,
        [
            Repetitions::Int(6),
            Repetitions::Float(1.0),
            Repetitions::Int(1),
            Repetitions::Float(1.5)
        ]
    );
    assert!(split.leaves.iter().all(|l| l.weight.is_none()));
}

#[test]
fn blend_and_blend_epochized_do_not_mix() {
    let dir = datasets();
    write(
        dir.path(),
        "epochized.yaml",
        &format!("{V2}splits:\n  train:\n    blend_epochized:\n      - {{path: ds1}}\n"),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{path: ds2}}\n      - {{path: \
             epochized.yaml}}\n"
        ),
    );
    let err = resolve(&outer, "train").unwrap_err();
    let Error::BadNode { file, yaml_path, reason } = err else { panic!("{err:?}") };
    assert_eq!(file, outer);
    assert_eq!(yaml_path, "splits.train.blend[1]");
    assert!(reason.contains("cannot mix blend and blend_epochized"), "{reason}");
}

#[test]
fn split_parts_are_inherited_and_overridden() {
    let dir = datasets();
    write(
        dir.path(),
        "inner.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{path: ds1}}\n      - {{path: ds2, \
             split_part: other}}\n  val:\n    path: ds3\n"
        ),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  val:\n    blend:\n      - {{path: ds1}}\n      - {{path: inner.yaml, \
             split_part: train}}\n      - {{path: inner.yaml}}\n"
        ),
    );
    let split = resolve(&outer, "val").unwrap();
    let parts: Vec<_> = split.leaves.iter().map(|l| l.split_part.as_str()).collect();
    assert_eq!(parts, ["val", "train", "other", "val"]);
    assert_eq!(names(&split), ["ds1", "ds1", "ds2", "ds3"]);
    // The nested file's `val` split is a single reference: its weight is the item's share.
    assert_eq!(weights(&split), [1.0 / 3.0, 0.5 / 3.0, 0.5 / 3.0, 1.0 / 3.0]);
}

#[test]
fn subflavors_merge_with_outer_levels_winning() {
    let dir = datasets();
    write(
        dir.path(),
        "inner.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: ds1\n    subflavors: {{a: inner, b: inner, c: inner}}\n"
        ),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - path: inner.yaml\n        subflavors: {{b: \
             outer, d: outer}}\n      - path: ds2\n"
        ),
    );
    let options = ResolveOptions {
        subflavors: Some(map(json!({"c": "loader", "e": "loader"}))),
        ..ResolveOptions::default()
    };
    let split = Metadataset::load(&outer).unwrap().resolve("train", &options).unwrap();
    assert_eq!(
        serde_json::to_string(&split.leaves[0].subflavors).unwrap(),
        r#"{"a":"inner","b":"outer","c":"loader","d":"outer","e":"loader"}"#
    );
    assert_eq!(
        serde_json::to_string(&split.leaves[1].subflavors).unwrap(),
        r#"{"c":"loader","e":"loader"}"#
    );
    // Without any subflavors anywhere the leaf has none (not an empty mapping).
    assert_eq!(resolve(&outer, "train").unwrap().leaves[1].subflavors, None);
}

#[test]
fn shuffle_over_epochs_multipliers_compose() {
    let dir = datasets();
    write(
        dir.path(),
        "inner.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{path: ds1, shuffle_over_epochs_multiplier: \
             3}}\n      - {{path: ds2, shuffle_over_epochs_multiplier: -1}}\n      - {{path: ds3, \
             shuffle_over_epochs_multiplier: null}}\n"
        ),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - {{path: inner.yaml, \
             shuffle_over_epochs_multiplier: 2}}\n      - {{path: inner.yaml, \
             shuffle_over_epochs_multiplier: -1}}\n      - {{path: inner.yaml, \
             shuffle_over_epochs_multiplier: null}}\n"
        ),
    );
    let mds = Metadataset::load(&outer).unwrap();
    let soe = |outermost: Option<i64>| -> Vec<Option<i64>> {
        let options =
            ResolveOptions { shuffle_over_epochs_multiplier: outermost, subflavors: None };
        mds.resolve("train", &options)
            .unwrap()
            .leaves
            .iter()
            .map(|l| l.shuffle_over_epochs)
            .collect()
    };
    assert_eq!(
        soe(Some(5)),
        [Some(30), Some(-1), None, Some(-1), Some(-1), None, None, None, None]
    );
    assert_eq!(soe(None), [None; 9]);
    assert_eq!(soe(Some(-1))[..3], [Some(-1), Some(-1), None]);
}

#[test]
fn ratio_subsets_merge_into_the_parent_range() {
    let dir = datasets();
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - path: ds1\n        subset: {{range: [50%, \
             100%]}}\n      - path: ds2\n        subset: {{range: [10, 30]}}\n      - path: ds3\n    \
             subset: {{range: [0%, 50%]}}\n"
        ),
    );
    let split = resolve(&mds, "train").unwrap();
    let subsets: Vec<_> = split.leaves.iter().map(|l| l.subset.unwrap()).collect();
    assert_eq!(
        subsets,
        [
            // child [0.5, 1.0] with the parent's [0, 0.5] inside it: [0.5, 0.75].
            DatasetSubset { range: Some((0.5, 0.75)), absolute_range: None },
            // absolute first, then the parent's ratio of what is left.
            DatasetSubset { range: Some((0.0, 0.5)), absolute_range: Some((10, Some(30))) },
            DatasetSubset { range: Some((0.0, 0.5)), absolute_range: None },
        ]
    );
    assert_eq!(subsets[0].compute(55).unwrap(), 27..41);
    assert_eq!(subsets[1].compute(55).unwrap(), 10..20);
    assert_eq!(subsets[2].compute(55).unwrap(), 0..27);
}

#[test]
fn absolute_subsets_only_apply_to_dataset_references() {
    let dir = datasets();
    let on_blend = write(
        dir.path(),
        "on_blend.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - path: ds1\n      - path: ds2\n    subset: \
             {{range: [0, 10]}}\n"
        ),
    );
    let err = resolve(&on_blend, "train").unwrap_err();
    let Error::BadNode { file, yaml_path, reason } = err else { panic!("{err:?}") };
    assert_eq!((file, yaml_path.as_str()), (on_blend, "splits.train.subset"));
    assert!(reason.contains("only allowed for a leaf dataset"), "{reason}");
    assert!(reason.contains("splits.train.blend[0]"), "{reason}");

    write(dir.path(), "inner_v2.yaml", &format!("{V2}splits:\n  train:\n    path: ds1\n"));
    let on_nested = write(
        dir.path(),
        "on_nested.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: inner_v2.yaml\n    subset: {{range: [5, end]}}\n"
        ),
    );
    let err = resolve(&on_nested, "train").unwrap_err();
    assert!(
        matches!(&err, Error::BadNode { yaml_path, .. } if yaml_path == "splits.train.subset"),
        "{err}"
    );

    // A V1 file passes it on unchecked: each of its leaves gets the absolute range.
    write(
        dir.path(),
        "inner_v1.yaml",
        "splits:\n  train:\n    datasets:\n      - path: ds1\n      - path: ds2\n",
    );
    let on_v1 = write(
        dir.path(),
        "on_v1.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: inner_v1.yaml\n    subset: {{range: [5, end]}}\n"
        ),
    );
    let split = resolve(&on_v1, "train").unwrap();
    let expected = DatasetSubset { range: Some((0.0, 1.0)), absolute_range: Some((5, None)) };
    assert!(split.leaves.iter().all(|l| l.subset == Some(expected)));

    // A join's own absolute subset is fine: the join is a leaf.
    let join = write(
        dir.path(),
        "join.yaml",
        &format!(
            "{V2}splits:\n  train:\n    join: [{{path: ds1}}, {{path: ds2}}]\n    joiner: \
             {{__module__: m, __class__: C}}\n    subset: {{range: [5, 10]}}\n"
        ),
    );
    let split = resolve(&join, "train").unwrap();
    assert_eq!(split.leaves[0].subset.unwrap().absolute_range, Some((5, Some(10))));
}

#[test]
fn joins_resolve_their_sources() {
    let dir = datasets();
    let mds = write(
        dir.path(),
        "join.yaml",
        &format!(
            "{V2}splits:\n  val:\n    blend:\n      - weight: 3\n        join:\n          a: \
             {{path: ds1, subflavors: {{x: a, y: a}}}}\n          b: {{path: ds2, split_part: \
             train, nonmatch: skip}}\n          c: {{path: ds3, nonmatch: none, split_config: \
             s.yaml, dataset_config: d.yaml}}\n        joiner: {{__module__: mod, __function__: \
             f}}\n        subflavors: {{y: join, z: join}}\n        \
             shuffle_over_epochs_multiplier: 4\n      - path: ds3\n        weight: 1\n"
        ),
    );
    let split = resolve(&mds, "val").unwrap();
    assert_eq!(weights(&split), [0.75, 0.25]);
    let leaf = &split.leaves[0];
    assert_eq!(leaf.path, dir.path().join("ds1"));
    assert_eq!(leaf.split_part, "val");
    // The join's own multiplier is ignored, as in the reference; the inherited 1 applies.
    assert_eq!(leaf.shuffle_over_epochs, Some(1));
    assert_eq!(serde_json::to_string(&leaf.subflavors).unwrap(), r#"{"y":"join","z":"join"}"#);
    let LeafKind::Joined(spec) = &leaf.kind else { panic!("{:?}", leaf.kind) };
    assert_eq!(spec.metadataset, mds);
    assert!(spec.named);
    assert_eq!(spec.joiner, Joiner::Function { module: "mod".into(), name: "f".into() });
    let sources: Vec<_> = spec
        .sources
        .iter()
        .map(|s| {
            (
                s.name.as_deref().unwrap(),
                s.path.file_name().unwrap().to_str().unwrap(),
                s.split_part.as_str(),
                s.nonmatch,
                serde_json::to_string(&s.subflavors).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sources,
        [
            ("a", "ds1", "val", Nonmatch::Error, r#"{"x":"a","y":"join","z":"join"}"#.to_owned()),
            ("b", "ds2", "train", Nonmatch::Skip, r#"{"y":"join","z":"join"}"#.to_owned()),
            ("c", "ds3", "val", Nonmatch::None, r#"{"y":"join","z":"join"}"#.to_owned()),
        ]
    );
    assert_eq!(spec.sources[2].split_config.as_deref(), Some("s.yaml"));
    assert_eq!(spec.sources[2].dataset_config.as_deref(), Some("d.yaml"));
}

#[test]
fn jsonl_leaves_and_single_dataset_paths() {
    let jsonl = ref_small().join("jsonl/data.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let mds = write(
        dir.path(),
        "mds.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - path: {}\n      - path: {}\n        \
             split_part: whatever\n",
            ref_small().display(),
            jsonl.display()
        ),
    );
    let split = resolve(&mds, "train").unwrap();
    assert_eq!(split.leaves[0].kind, LeafKind::WebDataset);
    assert_eq!(split.leaves[1].kind, LeafKind::Jsonl);
    assert_eq!(split.leaves[1].path, jsonl);

    let single = resolve_path(&ref_small(), "train", &ResolveOptions::default()).unwrap();
    assert_eq!(single.mode, BlendMode::None);
    assert_eq!(single.leaves.len(), 1);
    assert_eq!(single.leaves[0].path, ref_small());
    assert_eq!(single.leaves[0].shuffle_over_epochs, Some(1));
    let via_path = resolve_path(&mds, "train", &ResolveOptions::default()).unwrap();
    assert_eq!(via_path, split);
}

#[test]
fn relative_paths_resolve_against_the_file_that_names_them() {
    let dir = datasets();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    write(
        &dir.path().join("sub"),
        "inner.yaml",
        &format!("{V2}splits:\n  train:\n    path: ../ds2\n"),
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - path: ./sub/../ds1\n      - path: \
             sub/inner.yaml\n"
        ),
    );
    let split = resolve(&outer, "train").unwrap();
    let paths: Vec<_> = split.leaves.iter().map(|l| l.path.clone()).collect();
    assert_eq!(paths, [dir.path().join("ds1"), dir.path().join("ds2")]);
    let origin = &split.leaves[1].origin;
    assert_eq!(origin.file, dir.path().join("sub/inner.yaml"));
    assert_eq!(origin.yaml_path, "splits.train");
}

#[test]
fn cycles_between_files_are_errors() {
    let dir = datasets();
    let a = write(dir.path(), "a.yaml", &format!("{V2}splits:\n  train:\n    path: b.yaml\n"));
    let b = write(
        dir.path(),
        "b.yaml",
        &format!("{V2}splits:\n  train:\n    blend:\n      - path: ds1\n      - path: ./a.yaml\n"),
    );
    let err = Metadataset::load(&a).unwrap_err();
    let Error::Cycle { file, yaml_path, chain } = &err else { panic!("{err:?}") };
    assert_eq!(file, &b);
    assert_eq!(yaml_path, "splits.train.blend[1]");
    assert_eq!(chain, &format!("{} -> {} -> {}", a.display(), b.display(), a.display()));
    assert!(err.to_string().contains("metadataset cycle"), "{err}");

    // A file naming itself, even for another split, is a cycle too (the reference loads every
    // split of a nested file).
    let own = write(
        dir.path(),
        "self.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: ds1\n  val:\n    path: self.yaml\n    split_part: train\n"
        ),
    );
    assert!(matches!(Metadataset::load(&own), Err(Error::Cycle { .. })));

    // The same file twice is not a cycle.
    write(dir.path(), "leaf.yaml", &format!("{V2}splits:\n  train:\n    path: ds1\n"));
    let twice = write(
        dir.path(),
        "twice.yaml",
        &format!(
            "{V2}splits:\n  train:\n    blend:\n      - path: leaf.yaml\n      - path: leaf.yaml\n"
        ),
    );
    assert_eq!(names(&resolve(&twice, "train").unwrap()), ["ds1", "ds1"]);
}

#[test]
fn chains_of_nested_files_deeper_than_the_bound_are_errors() {
    let dir = datasets();
    // `m<i>.yaml` references `m<i+1>.yaml`; the last one references `ds1`.
    let chain = |n: usize| -> PathBuf {
        for i in 0..n {
            let target = if i + 1 == n { "ds1".to_owned() } else { format!("m{n}_{}.yaml", i + 1) };
            write(
                dir.path(),
                &format!("m{n}_{i}.yaml"),
                &format!("{V2}splits:\n  train:\n    path: {target}\n"),
            );
        }
        dir.path().join(format!("m{n}_0.yaml"))
    };
    // A chain of exactly the bound loads and resolves.
    assert_eq!(names(&resolve(&chain(MAX_NESTING), "train").unwrap()), ["ds1"]);
    // 3,000 files (once a stack overflow) stop at the bound with the deepest file loaded named.
    let root = chain(3000);
    let err = Metadataset::load(&root).unwrap_err();
    let Error::TooDeep { file, yaml_path, root: from, limit } = &err else { panic!("{err:?}") };
    assert_eq!(file, &dir.path().join(format!("m3000_{}.yaml", MAX_NESTING - 1)));
    assert_eq!((yaml_path.as_str(), from, *limit), ("splits.train", &root, MAX_NESTING));
    assert!(err.to_string().contains("nest more than 100 levels deep"), "{err}");
    assert!(matches!(
        resolve_path(&root, "train", &ResolveOptions::default()),
        Err(Error::TooDeep { .. })
    ));
}

#[test]
fn bad_paths_are_named_with_their_node() {
    let dir = datasets();
    std::fs::create_dir(dir.path().join("raw")).unwrap();
    let check = |body: &str, yaml_path: &str, reason: &str| {
        let mds = write(dir.path(), "bad.yaml", &format!("{V2}splits:\n  train:\n{body}"));
        let err = Metadataset::load(&mds).unwrap_err();
        match &err {
            Error::BadPath { file, yaml_path: at, reason: got, .. }
            | Error::BadNode { file, yaml_path: at, reason: got } => {
                assert_eq!(file, &mds, "{err}");
                assert_eq!(at, yaml_path, "{err}");
                assert!(got.contains(reason), "{got:?} does not contain {reason:?}");
            }
            other => panic!("{other:?}"),
        }
    };
    check("    path: missing\n", "splits.train.path", "no such file or folder");
    check("    path: raw\n", "splits.train.path", "did you forget `energon prepare`");
    check(
        "    path: dss://profile/ds\n",
        "splits.train.path",
        "names a dataset version as NAME@VERSION",
    );
    check(
        "    path: rclone://profile/ds\n",
        "splits.train.path",
        "rclone:// paths are not supported",
    );
    check(
        "    join: [{path: ds1}, {path: raw}]\n    joiner: {__module__: m, __class__: C}\n",
        "splits.train.join[1].path",
        "a joined dataset must be a prepared WebDataset",
    );
    check(
        "    path: ds1\n    aux: {media: raw}\n",
        "splits.train.aux.media",
        "no .nv-meta/index.sqlite",
    );
    check(
        "    path: ds1\n    aux: {media: filesystem://nope}\n",
        "splits.train.aux.media",
        "no such folder",
    );
    check(
        &format!(
            "    path: {}\n    split_config: s.yaml\n",
            ref_small().join("jsonl/data.jsonl").display()
        ),
        "splits.train.split_config",
        "cannot be set for a JSONL dataset",
    );
    write(dir.path(), "leaf.yaml", &format!("{V2}splits:\n  train:\n    path: ds1\n"));
    check(
        "    path: leaf.yaml\n    dataset_config: d.yaml\n",
        "splits.train.dataset_config",
        "nested metadataset",
    );
    // An error in another split fails the load too, as in the reference.
    check("    path: ds1\n  val:\n    path: missing\n", "splits.val.path", "no such file");
    let v1 = write(
        dir.path(),
        "v1.yaml",
        &format!(
            "splits:\n  train:\n    datasets:\n      - path: {}\n",
            ref_small().join("jsonl/data.jsonl").display()
        ),
    );
    let err = Metadataset::load(&v1).unwrap_err();
    assert!(err.to_string().contains("cannot reference a JSONL file; use MetadatasetV2"), "{err}");
}

#[test]
fn aux_sources_resolve_to_datasets_and_folders() {
    let dir = datasets();
    std::fs::create_dir(dir.path().join("raw")).unwrap();
    let mds = write(
        dir.path(),
        "aux.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: ds1\n    aux:\n      a: ds2\n      b: \
             filesystem://raw\n      c: {{fs_path: {}}}\n      d: {{path: ./ds3}}\n",
            dir.path().join("raw").display()
        ),
    );
    let split = resolve(&mds, "train").unwrap();
    assert_eq!(
        split.leaves[0].aux,
        [
            ("a".to_owned(), AuxSource::Dataset(dir.path().join("ds2"))),
            ("b".to_owned(), AuxSource::Folder(dir.path().join("raw"))),
            ("c".to_owned(), AuxSource::Folder(dir.path().join("raw"))),
            ("d".to_owned(), AuxSource::Dataset(dir.path().join("ds3"))),
        ]
    );
}

#[test]
fn unknown_splits_list_the_defined_ones() {
    let dir = datasets();
    let mds = write(
        dir.path(),
        "m.yaml",
        &format!("{V2}splits:\n  train:\n    path: ds1\n  val:\n    path: ds2\n"),
    );
    let err = resolve(&mds, "test").unwrap_err();
    assert!(
        matches!(&err, Error::UnknownSplit { split, defined, .. } if split == "test" && defined == "train, val"),
        "{err}"
    );
    let outer = write(
        dir.path(),
        "outer.yaml",
        &format!("{V2}splits:\n  train:\n    path: m.yaml\n    split_part: nope\n"),
    );
    let err = resolve(&outer, "train").unwrap_err();
    assert!(matches!(&err, Error::UnknownSplit { file, .. } if *file == mds), "{err}");
}

#[test]
fn paths_normalize_lexically() {
    assert_eq!(normalize(Path::new("/a/./b/../c")), Path::new("/a/c"));
    assert_eq!(normalize(Path::new("/a/../../c")), Path::new("/c"));
    assert_eq!(normalize(Path::new("a/../../c")), Path::new("c"));
    assert_eq!(resolve_written(Path::new("/x/y"), "../z"), Ok(PathBuf::from("/x/z")));
    assert_eq!(resolve_written(Path::new("/x/y"), "/abs"), Ok(PathBuf::from("/abs")));
    assert!(resolve_written(Path::new("/x"), "dss://bucket/x").is_err());
}

#[test]
fn aux_sources_open_as_file_stores() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("raw")).unwrap();
    std::fs::write(dir.path().join("raw/notes.txt"), b"hello").unwrap();
    let mds = write(
        dir.path(),
        "aux.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: {}\n    aux:\n      media: {}\n      files: \
             filesystem://raw\n",
            ref_small().join("jsonl/data.jsonl").display(),
            ref_small().display()
        ),
    );
    let split = resolve(&mds, "train").unwrap();
    let stores: Vec<_> =
        split.leaves[0].aux.iter().map(|(n, s)| (n.clone(), s.open().unwrap())).collect();
    assert_eq!(stores[0].0, "media");
    let (caption, source) = stores[0].1.get("00000042.txt").unwrap();
    let dataset = energon_reader::Dataset::open(&ref_small(), &Default::default()).unwrap();
    let raw = dataset.read(42).unwrap().unwrap();
    assert_eq!(raw.part("txt").unwrap(), &caption);
    assert_eq!(source.file_names, ["00000042.txt"]);
    assert_eq!(stores[1].1.get("notes.txt").unwrap().0.as_ref(), b"hello");
    assert!(stores[1].1.get("missing.txt").is_err());
    assert!(stores[0].1.get("nope.txt").is_err());
}

#[test]
fn traversal_lists_leaves_like_the_reference() {
    let dir = datasets();
    let nested = reference_v1_files(dir.path());
    let leaves = traverse(&nested, "train").unwrap();
    // test_metadataset.py::test_traverse_metadataset_flattens_nested_v1_references
    let paths: Vec<PathBuf> = leaves.iter().map(|l| l.path.clone()).collect();
    let (ds1, ds2) = (dir.path().join("ds1"), dir.path().join("ds2"));
    assert_eq!(paths, [ds1.clone(), ds2.clone(), ds1, ds2]);
    assert!(leaves.iter().all(|l| l.split_part == "train" && l.aux.is_empty()));
    assert_eq!(
        serde_json::to_string(&leaves[2].subflavors).unwrap(),
        r#"{"source":"nested_metadataset.yaml","mds":"nested_val"}"#
    );
    let join = write(
        dir.path(),
        "join.yaml",
        &format!(
            "{V2}splits:\n  train:\n    join: [{{path: ds1}}, {{path: ds2}}]\n    joiner: \
             {{__module__: m, __class__: C}}\n"
        ),
    );
    let err = traverse(&join, "train").unwrap_err();
    assert!(err.to_string().contains("does not support joined datasets"), "{err}");
    // Missing datasets and aux sources are listed as written (the strict loader refuses them).
    let missing = write(
        dir.path(),
        "missing.yaml",
        &format!(
            "{V2}splits:\n  train:\n    path: missing_ds\n    subflavors: {{a: 1}}\n    aux:\n      \
             labels: missing_aux\n      media: filesystem://media\n      remote: \
             filesystem+s3://bucket/x\n"
        ),
    );
    assert!(Metadataset::load(&missing).is_err());
    let leaves = traverse(&missing, "train").unwrap();
    assert_eq!(leaves.len(), 1);
    assert_eq!(leaves[0].path, dir.path().join("missing_ds"));
    let aux: Vec<(&str, PathBuf)> =
        leaves[0].aux.iter().map(|(n, p)| (n.as_str(), p.clone())).collect();
    assert_eq!(
        aux,
        [
            ("labels", dir.path().join("missing_aux")),
            ("media", dir.path().join("media")),
            ("remote", PathBuf::from("s3://bucket/x")),
        ]
    );
    assert_eq!(serde_json::to_string(&leaves[0].subflavors).unwrap(), r#"{"a":1}"#);
}
