//! Grammar tests: every node type, the V1 form, and one precise error per kind of mistake.

use std::path::Path;

use serde_json::json;

use super::{parse::parse_value, *};
use crate::Error;

fn parse(text: &str) -> Result<MetadatasetFile, Error> {
    let file = Path::new("/data/mds.yaml");
    let value = energon_index::yaml::parse_yaml(text, file)?;
    parse_value(&value, file)
}

/// Parses `text` expecting a `BadNode` error at `yaml_path` whose reason contains `reason`.
#[track_caller]
fn check_err(text: &str, yaml_path: &str, reason: &str) {
    match parse(text) {
        Err(Error::BadNode { file, yaml_path: at, reason: got }) => {
            assert_eq!(file, Path::new("/data/mds.yaml"));
            assert_eq!(at, yaml_path, "reason: {got}");
            assert!(got.contains(reason), "{got:?} does not contain {reason:?}");
        }
        other => panic!("expected a BadNode error at {yaml_path}, got {other:?}"),
    }
}

const V2: &str = "__module__: megatron.energon\n__class__: MetadatasetV2\n";

fn v2(body: &str) -> String {
    format!("{V2}{body}")
}

fn train_node(text: &str) -> Node {
    parse(text).unwrap().split("train").unwrap().clone()
}

#[test]
fn a_v2_blend_with_every_item_kind_parses() {
    let mds = parse(&v2("\
splits:
  train:
    blend:
      - weight: 2
        path: ./coco
        split_part: val
        subflavors: {source: coco, n: 1}
        shuffle_over_epochs_multiplier: null
        dataset_config: other.yaml
        split_config: split2.yaml
        subset: {range: [10%, 50%]}
        aux:
          media: ./media_ds
          files: filesystem://./raw
      - path: nested.yaml
      - weight: 0.5
        join:
          - path: ds1
          - path: ds2
            nonmatch: skip
        joiner: {__module__: megatron.energon, __class__: CaptioningSample}
  val:
    path: ds1
"))
    .unwrap();
    assert_eq!(mds.version, Version::V2);
    assert_eq!(mds.splits.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["train", "val"]);
    let Node::Blend(blend) = mds.split("train").unwrap() else { panic!() };
    assert_eq!(blend.yaml_path, "splits.train");
    assert_eq!(blend.items.iter().map(|i| i.weight).collect::<Vec<_>>(), [2.0, 1.0, 0.5]);
    let Item::Ref(coco) = &blend.items[0].item else { panic!() };
    assert_eq!(coco.yaml_path, "splits.train.blend[0]");
    assert_eq!(coco.path, "./coco");
    assert_eq!(coco.split_part.as_deref(), Some("val"));
    assert_eq!(
        coco.subflavors,
        Some(json!({"source": "coco", "n": 1}).as_object().unwrap().clone())
    );
    assert_eq!(coco.shuffle_over_epochs_multiplier, None);
    assert_eq!(coco.dataset_config.as_deref(), Some("other.yaml"));
    assert_eq!(coco.split_config.as_deref(), Some("split2.yaml"));
    assert_eq!(coco.subset, Some(Subset::Ratio { start: 0.1, end: 0.5 }));
    assert_eq!(
        coco.aux,
        [
            ("media".to_owned(), AuxSpec::Str("./media_ds".into())),
            ("files".to_owned(), AuxSpec::Str("filesystem://./raw".into()))
        ]
    );
    let Item::Ref(nested) = &blend.items[1].item else { panic!() };
    assert_eq!(nested.shuffle_over_epochs_multiplier, Some(1));
    assert_eq!(nested.subflavors, None);
    let Item::Join(join) = &blend.items[2].item else { panic!() };
    assert!(!join.named);
    assert_eq!(join.sources.len(), 2);
    assert_eq!(join.sources[1].nonmatch, Nonmatch::Skip);
    assert_eq!(join.sources[1].dataset.yaml_path, "splits.train.blend[2].join[1]");
    assert_eq!(
        join.joiner,
        Joiner::Class { module: "megatron.energon".into(), name: "CaptioningSample".into() }
    );
    assert!(matches!(mds.split("val"), Some(Node::Ref(r)) if r.path == "ds1"));
}

#[test]
fn blend_epochized_keeps_integer_and_float_repetitions() {
    let node = train_node(&v2("\
splits:
  train:
    blend_epochized:
      - repetitions: 2
        path: a
      - repetitions: 0.5
        path: b
      - path: c
      - repetitions: 2.0
        path: d
    subset: {range: [0%, 50%]}
"));
    let Node::BlendEpochized(blend) = node else { panic!() };
    let reps: Vec<_> = blend.items.iter().map(|i| i.repetitions).collect();
    assert_eq!(
        reps,
        [
            Repetitions::Int(2),
            Repetitions::Float(0.5),
            Repetitions::Int(1),
            Repetitions::Float(2.0)
        ]
    );
    assert_eq!(blend.subset, Some(Subset::Ratio { start: 0.0, end: 0.5 }));
}

#[test]
fn joins_by_name_with_a_function_joiner() {
    let node = train_node(&v2("\
splits:
  train:
    join:
      image: {path: ds1}
      text: {path: ds2, nonmatch: none, split_part: train}
    joiner: {__module__: my.module, __function__: join_fn}
    split_part: val
    subflavors: {a: 1}
    subset: {range: [0, end]}
"));
    let Node::Join(join) = node else { panic!() };
    assert!(join.named);
    let names: Vec<_> = join.sources.iter().map(|s| s.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["image", "text"]);
    assert_eq!(join.sources[1].nonmatch, Nonmatch::None);
    assert_eq!(
        join.joiner,
        Joiner::Function { module: "my.module".into(), name: "join_fn".into() }
    );
    assert_eq!(join.split_part.as_deref(), Some("val"));
    assert_eq!(join.subset, Some(Subset::Absolute { start: 0, end: None }));
}

#[test]
fn v1_files_read_datasets_and_the_legacy_subflavor() {
    let mds = parse(
        "\
splits:
  train:
    datasets:
      - weight: 1
        path: ds1
        subflavor: ds1
        subflavors: {source: x, number: 43}
        shuffle_over_epochs_multiplier: 3
      - path: ds2
        subflavor: ds2
      - path: ds3
        subflavor: ignored
        subflavors: {__subflavor__: kept}
",
    )
    .unwrap();
    assert_eq!(mds.version, Version::V1);
    let Node::Blend(blend) = mds.split("train").unwrap() else { panic!() };
    assert_eq!(blend.version, Version::V1);
    let refs: Vec<&DatasetRef> = blend
        .items
        .iter()
        .map(|i| match &i.item {
            Item::Ref(r) => r,
            Item::Join(_) => panic!(),
        })
        .collect();
    assert!(refs.iter().all(|r| r.version == Version::V1));
    // `__subflavor__` comes first, as the reference builds `{"__subflavor__": x, **subflavors}`.
    assert_eq!(
        serde_json::to_string(&refs[0].subflavors).unwrap(),
        r#"{"__subflavor__":"ds1","source":"x","number":43}"#
    );
    assert_eq!(refs[0].shuffle_over_epochs_multiplier, Some(3));
    assert_eq!(serde_json::to_string(&refs[1].subflavors).unwrap(), r#"{"__subflavor__":"ds2"}"#);
    assert_eq!(serde_json::to_string(&refs[2].subflavors).unwrap(), r#"{"__subflavor__":"kept"}"#);
    let explicit = parse("__module__: megatron.energon\n__class__: Metadataset\nsplits: {}\n");
    assert_eq!(explicit.unwrap().version, Version::V1);
}

#[test]
fn unknown_keys_name_their_yaml_path() {
    check_err(
        &v2("splits:\n  train:\n    blend:\n      - path: a\n      - wieght: 2\n        path: b\n"),
        "splits.train.blend[1].wieght",
        "unknown key \"wieght\" (expected one of: path, split_part",
    );
    check_err(&v2("splits: {}\nsampling: random\n"), "sampling", "unknown key");
    check_err(
        &v2("splits:\n  train:\n    blend: [{path: a}]\n    split_part: val\n"),
        "splits.train.split_part",
        "unknown key",
    );
    check_err(
        "splits:\n  train:\n    datasets:\n      - path: a\n        aux: {}\n",
        "splits.train.datasets[0].aux",
        "unknown key",
    );
    check_err(
        &v2("splits:\n  train:\n    path: a\n    subset: {range: [0, 1], step: 2}\n"),
        "splits.train.subset.step",
        "unknown key",
    );
}

#[test]
fn wrong_types_say_what_was_expected() {
    check_err(
        &v2("splits:\n  train:\n    blend:\n      - weight: \"2\"\n        path: a\n"),
        "splits.train.blend[0].weight",
        "expected a number, found a string (\"2\")",
    );
    check_err(
        &v2("splits:\n  train:\n    blend:\n      - weight: yes\n        path: a\n"),
        "splits.train.blend[0].weight",
        "expected a number, found a boolean (true)",
    );
    check_err(&v2("splits:\n  train:\n    path: 12\n"), "splits.train.path", "expected a string");
    check_err(
        &v2("splits:\n  train:\n    path: a\n    split_part: [x]\n"),
        "splits.train.split_part",
        "expected a string, found a list",
    );
    check_err(
        &v2("splits:\n  train:\n    path: a\n    subflavors: [x]\n"),
        "splits.train.subflavors",
        "expected a mapping",
    );
    check_err(
        &v2("splits:\n  train:\n    blend: {path: a}\n"),
        "splits.train.blend",
        "expected a list",
    );
    check_err(&v2("splits: [train]\n"), "splits", "expected a mapping of split names");
    check_err(&v2("splits:\n  train: ./ds\n"), "splits.train", "expected a mapping with blend");
    check_err(
        &v2("splits:\n  train:\n    path: a\n    shuffle_over_epochs_multiplier: 1.5\n"),
        "splits.train.shuffle_over_epochs_multiplier",
        "expected a positive integer, -1",
    );
    check_err(
        &v2("splits:\n  train:\n    path: a\n    shuffle_over_epochs_multiplier: 0\n"),
        "splits.train.shuffle_over_epochs_multiplier",
        "found a number (0)",
    );
    check_err("- a\n- b\n", "<root>", "expected a metadataset");
}

#[test]
fn missing_required_keys_are_named() {
    check_err(
        &v2("splits:\n  train:\n    blend:\n      - weight: 1\n"),
        "splits.train.blend[0].path",
        "missing key \"path\"",
    );
    check_err(
        &v2("splits:\n  train:\n    split_part: x\n"),
        "splits.train",
        "expected one of the keys blend",
    );
    check_err(&v2("train:\n  path: a\n"), "train", "unknown key");
    check_err(&v2(""), "splits", "missing key \"splits\"");
    check_err(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits: null\n",
        "splits",
        "expected a mapping",
    );
    check_err(
        &v2("splits:\n  train:\n    join: [{path: a}]\n"),
        "splits.train.joiner",
        "missing key \"joiner\"",
    );
    check_err(&v2("splits:\n  train:\n    blend: []\n"), "splits.train.blend", "at least one item");
    check_err(
        &v2("splits:\n  train:\n    join: []\n    joiner: {__module__: m, __class__: C}\n"),
        "splits.train.join",
        "at least one dataset",
    );
}

#[test]
fn weights_and_repetitions_must_be_positive() {
    for bad in ["0", "-1", "-0.5", "1e999"] {
        let text =
            v2(&format!("splits:\n  train:\n    blend:\n      - weight: {bad}\n        path: a\n"));
        match parse(&text) {
            Err(Error::BadNode { yaml_path, reason, .. }) => {
                assert_eq!(yaml_path, "splits.train.blend[0].weight");
                assert!(reason.contains("positive") || reason.contains("finite"), "{reason}");
            }
            Err(Error::Index(e)) => assert!(e.to_string().contains("not finite"), "{e}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    check_err(
        &v2("splits:\n  train:\n    blend_epochized:\n      - repetitions: 0\n        path: a\n"),
        "splits.train.blend_epochized[0].repetitions",
        "must be a positive number, found 0",
    );
    check_err(
        "splits:\n  train:\n    datasets:\n      - weight: 0\n        path: a\n",
        "splits.train.datasets[0].weight",
        "positive",
    );
}

#[test]
fn metadataset_classes_are_checked() {
    check_err(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\nsplits: {}\n",
        "__class__",
        "expected a metadataset class",
    );
    check_err(
        "__module__: my.module\n__class__: MetadatasetV2\nsplits: {}\n",
        "__module__",
        "expected \"megatron.energon\"",
    );
    check_err("__module__: megatron.energon\nsplits: {}\n", "__module__", "without __class__");
    check_err("__class__: MetadatasetV2\nsplits: {}\n", "__class__", "without __module__");
    let sub =
        parse("__module__: megatron.energon.metadataset\n__class__: MetadatasetV2\nsplits: {}\n");
    assert_eq!(sub.unwrap().version, Version::V2);
}

#[test]
fn subsets_accept_percentages_indices_and_end() {
    let subset = |range: &str| {
        let text = v2(&format!("splits:\n  train:\n    path: a\n    subset: {{range: {range}}}\n"));
        match parse(&text).map(|m| m.split("train").cloned()) {
            Ok(Some(Node::Ref(r))) => Ok(r.subset.unwrap()),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        }
    };
    assert_eq!(subset("[25%, 75%]"), Ok(Subset::Ratio { start: 0.25, end: 0.75 }));
    assert_eq!(subset("[0%, 100%]"), Ok(Subset::Ratio { start: 0.0, end: 1.0 }));
    assert_eq!(subset("[12.5%, end]"), Ok(Subset::Ratio { start: 0.125, end: 1.0 }));
    assert_eq!(subset("[100, 200]"), Ok(Subset::Absolute { start: 100, end: Some(200) }));
    assert_eq!(subset("[100, end]"), Ok(Subset::Absolute { start: 100, end: None }));
    assert_eq!(subset("[0, \" end \"]"), Ok(Subset::Absolute { start: 0, end: None }));
    for (range, reason) in [
        ("[end, 10]", "start cannot be end"),
        ("[10%, 5]", "both be sample indices or both percentages"),
        ("[5, 10%]", "both be sample indices or both percentages"),
        ("[20, 10]", "start 20 is after end 10"),
        ("[50%, 10%]", "start percentage is after end"),
        ("[0%, 150%]", "not between 0% and 100%"),
        ("[-1, 10]", "expected a sample index"),
        ("[0.5, 1]", "expected a sample index"),
        ("[\"50\", end]", "expected a sample index"),
        ("[1, 2, 3]", "expected a list [start, end]"),
    ] {
        let err = subset(range).unwrap_err();
        assert!(err.contains(reason), "{range}: {err}");
        assert!(err.contains("splits.train.subset.range"), "{range}: {err}");
    }
}

#[test]
fn joins_are_checked() {
    let joiner = "    joiner: {__module__: m, __class__: C}\n";
    check_err(
        &v2(&format!(
            "splits:\n  train:\n    join: [{{path: a, nonmatch: skip}}, {{path: b}}]\n{joiner}"
        )),
        "splits.train.join[0]",
        "primary (first) dataset of a join must have nonmatch: error",
    );
    check_err(
        &v2(&format!(
            "splits:\n  train:\n    join: [{{path: a}}, {{path: b, nonmatch: maybe}}]\n{joiner}"
        )),
        "splits.train.join[1].nonmatch",
        "expected one of error, skip, none",
    );
    check_err(
        &v2(&format!(
            "splits:\n  train:\n    join: [{{path: a}}]\n    dataset_config: x.yaml\n{joiner}"
        )),
        "splits.train.dataset_config",
        "cannot be set for a whole join",
    );
    check_err(
        &v2(&format!("splits:\n  train:\n    join: [{{path: a, aux: {{x: y}}}}]\n{joiner}")),
        "splits.train.join[0].aux",
        "not supported on a joined dataset",
    );
    check_err(
        &v2("splits:\n  train:\n    join: [{path: a}]\n    joiner: {__module__: m}\n"),
        "splits.train.joiner",
        "expected {__module__",
    );
    check_err(
        &v2(
            "splits:\n  train:\n    join: [{path: a}]\n    joiner: {__module__: m, __class__: C, x: 1}\n",
        ),
        "splits.train.joiner.x",
        "unknown key",
    );
    check_err(
        &v2(&format!("splits:\n  train:\n    join: [{{path: a, weight: 2}}]\n{joiner}")),
        "splits.train.join[0].weight",
        "unknown key",
    );
}

#[test]
fn aux_takes_strings_and_typed_references() {
    let node = train_node(&v2("\
splits:
  train:
    path: a
    aux:
      a: ds
      b: {path: ds2}
      c: {fs_path: /abs/folder}
"));
    let Node::Ref(r) = node else { panic!() };
    assert_eq!(
        r.aux,
        [
            ("a".to_owned(), AuxSpec::Str("ds".into())),
            ("b".to_owned(), AuxSpec::Dataset("ds2".into())),
            ("c".to_owned(), AuxSpec::Filesystem("/abs/folder".into())),
        ]
    );
    check_err(
        &v2("splits:\n  train:\n    path: a\n    aux: {a: 3}\n"),
        "splits.train.aux.a",
        "expected a dataset path",
    );
    check_err(
        &v2("splits:\n  train:\n    path: a\n    aux: [a]\n"),
        "splits.train.aux",
        "expected a mapping",
    );
}

#[test]
fn repetition_products_follow_python_numbers() {
    let (two, half) = (Repetitions::Int(2), Repetitions::Float(0.5));
    assert_eq!(two.times(Repetitions::Int(3)), Some(Repetitions::Int(6)));
    assert_eq!(two.times(half), Some(Repetitions::Float(1.0)));
    assert_eq!(half.times(two), Some(Repetitions::Float(1.0)));
    assert_eq!(Repetitions::Int(u64::MAX).times(two), None);
    assert!(Repetitions::Float(1.0).is_one());
    assert!(Repetitions::Int(1).is_one());
    assert!(!half.is_one());
}
