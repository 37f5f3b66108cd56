//! Tests of `dataset.yaml` parsing, validation and writing.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

fn parse(text: &str) -> Result<DatasetConfig> {
    let value = yaml::parse_yaml(text, Path::new("dataset.yaml"))?;
    DatasetConfig::from_value(&value, Path::new("dataset.yaml"))
}

/// Parsing `text` fails with a message naming the file and containing `needle`.
fn check_bad(text: &str, needle: &str) {
    let err = parse(text).unwrap_err().to_string();
    assert!(err.contains(needle) && err.contains("dataset.yaml"), "{text}: {err}");
}

fn check_spec(raw: &str, want: &[(&str, &[&str])]) {
    let spec = FieldSpec::parse_lenient(raw);
    let got: Vec<(&str, Vec<&str>)> = spec
        .alternatives
        .iter()
        .map(|a| (a.part.as_str(), a.keys.iter().map(String::as_str).collect()))
        .collect();
    let want: Vec<(&str, Vec<&str>)> = want.iter().map(|(p, k)| (*p, k.to_vec())).collect();
    assert_eq!(got, want, "{raw:?}");
    assert_eq!(spec.raw, raw);
}

fn captioning_field_map() -> SampleLoading {
    SampleLoading::FieldMap(FieldMap::from_pairs([("image", "jpg"), ("caption", "txt")]))
}

#[test]
fn reads_the_reference_dataset_yaml() {
    let config = read_dataset_config(&fixture().join(".nv-meta/dataset.yaml")).unwrap();
    let DatasetConfig::Standard(standard) = &config else { panic!("{config:?}") };
    assert_eq!(
        standard.sample_type,
        ClassRef { module: "megatron.energon".into(), class: "CaptioningSample".into() }
    );
    assert_eq!(standard.loading, captioning_field_map());
    assert_eq!(
        standard.sample_type.builtin_sample_type().map(|t| t.name),
        Some("CaptioningSample")
    );
    assert!(standard.subflavors.is_none() && standard.extra.is_empty());
    let SampleLoading::FieldMap(map) = &standard.loading else { unreachable!() };
    assert_eq!(map.part_filter().into_iter().collect::<Vec<_>>(), ["jpg", "txt"]);
}

#[test]
fn writes_the_reference_dataset_yaml_byte_for_byte() {
    let want = std::fs::read(fixture().join(".nv-meta/dataset.yaml")).unwrap();
    let config = DatasetConfig::standard("CaptioningSample", captioning_field_map());
    assert_eq!(dataset_config_bytes(&config).as_bytes(), want.as_slice());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dataset.yaml");
    write_dataset_config(&path, &config).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), want);
    assert_eq!(read_dataset_config(&path).unwrap(), config);
    let pairs = [("image".to_owned(), "jpg".to_owned()), ("caption".to_owned(), "txt".to_owned())];
    write_standard_dataset_yaml(&path, "CaptioningSample", &pairs).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), want);
    write_crude_dataset_yaml(&path).unwrap();
    assert_eq!(read_dataset_config(&path).unwrap(), DatasetConfig::crude());
}

#[test]
fn writes_crude_and_sample_loader_forms_like_prepare() {
    assert_eq!(
        dataset_config_bytes(&DatasetConfig::crude()),
        "__module__: megatron.energon\n__class__: CrudeWebdataset\n"
    );
    let custom = DatasetConfig::standard(
        "TextSample",
        SampleLoading::Custom {
            sample_loader: "sample_loader.py:sample_loader".into(),
            part_filter: PartFilter::Function("sample_loader.py:part_filter".into()),
        },
    );
    let text = dataset_config_bytes(&custom);
    assert_eq!(
        text,
        "sample_type:\n  __module__: megatron.energon\n  __class__: TextSample\n\
         sample_loader: sample_loader.py:sample_loader\npart_filter: sample_loader.py:part_filter\n"
    );
    assert_eq!(parse(&text).unwrap(), custom);
    assert_eq!(
        parse(&dataset_config_bytes(&DatasetConfig::crude())).unwrap(),
        DatasetConfig::crude()
    );
}

#[test]
fn parses_all_forms() {
    let crude = parse("__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors: {src: a}\npart_filter: [jpg, json]\n")
        .unwrap();
    let DatasetConfig::Crude(c) = &crude else { panic!("{crude:?}") };
    assert_eq!(c.part_filter, Some(PartFilter::Names(vec!["jpg".into(), "json".into()])));
    assert_eq!(crude.subflavors(), Some(json!({"src": "a"}).as_object().unwrap()));

    let legacy = parse("__module__: megatron.energon\n__class__: VQAOCRWebdataset\nfield_map:\n  image: png\n  words_text: json[w]\n")
        .unwrap();
    let DatasetConfig::Legacy(l) = &legacy else { panic!("{legacy:?}") };
    assert_eq!((l.class.as_str(), l.sample_type.name), ("VQAOCRWebdataset", "VQAOCRSample"));

    let with_extra = parse(
        "sample_type: {__module__: megatron.energon, __class__: TextSample}\nfield_map: {text: txt}\n\
         split_config: split2.yaml\nshuffle_over_epochs: 2\nsubflavors: null\n",
    )
    .unwrap();
    assert_eq!(
        with_extra.extra(),
        json!({"split_config": "split2.yaml", "shuffle_over_epochs": 2}).as_object().unwrap()
    );
    assert_eq!(with_extra.subflavors(), None);
    // The explicit default class and a custom sample type module are accepted.
    let explicit = parse(
        "__module__: megatron.energon\n__class__: StandardWebdatasetFactory\n\
         sample_type: {__module__: my.samples, __class__: Mine}\nfield_map: {anything: bin}\n",
    )
    .unwrap();
    let DatasetConfig::Standard(s) = &explicit else { panic!("{explicit:?}") };
    assert_eq!(s.sample_type.builtin_sample_type(), None);
    // The written form keeps sample_type, loading, subflavors, then the extra keys.
    assert_eq!(
        dataset_config_bytes(&with_extra),
        "sample_type:\n  __module__: megatron.energon\n  __class__: TextSample\nfield_map:\n  text: txt\n\
         split_config: split2.yaml\nshuffle_over_epochs: 2\n"
    );
}

#[test]
fn enforces_the_reference_rules() {
    let st = "sample_type: {__module__: megatron.energon, __class__: CaptioningSample}\n";
    check_bad(st, "exactly one of field_map and sample_loader");
    check_bad(
        &format!("{st}field_map: {{image: jpg}}\nsample_loader: s.py:f\npart_filter: s.py:p\n"),
        "exactly one",
    );
    check_bad(&format!("{st}sample_loader: s.py:f\n"), "part_filter must be given");
    check_bad(
        &format!("{st}field_map: {{image: jpg}}\npart_filter: [jpg]\n"),
        "part_filter is not allowed",
    );
    check_bad(
        &format!("{st}field_map: {{image: jpg, label: cls}}\n"),
        "does not map to type CaptioningSample",
    );
    check_bad(&format!("{st}field_map: {{image: 1}}\n"), "field_map.image: expected a string");
    check_bad(&format!("{st}field_map: [jpg]\n"), "field_map: expected a mapping");
    check_bad(
        &format!("{st}field_map: {{image: jpg}}\nunknown_arg: 1\n"),
        "unknown key \"unknown_arg\"",
    );
    check_bad(
        &format!("{st}field_map: {{image: jpg}}\nsubflavors: [a]\n"),
        "subflavors: expected a mapping",
    );
    check_bad("field_map: {image: jpg}\n", "missing sample_type");
    check_bad(
        "sample_type: {__module__: megatron.energon}\nfield_map: {}\n",
        "needs __module__ and __class__",
    );
    check_bad(
        "sample_type: {__module__: megatron.energon, __class__: NoSuchSample}\nfield_map: {}\n",
        "unknown sample class",
    );
    check_bad(
        "sample_type: megatron.energon.TextSample\nfield_map: {}\n",
        "sample_type: expected a mapping",
    );
    check_bad(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\nsample_loader: s.py:f\n",
        "not allowed with CrudeWebdataset",
    );
    check_bad(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\nfield_map: {a: b}\n",
        "not allowed with CrudeWebdataset",
    );
    check_bad(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\npart_filter: 3\n",
        "part_filter: expected",
    );
    check_bad(
        "__module__: my.module\n__class__: MyFactory\n",
        "unsupported dataset class my.module.MyFactory",
    );
    check_bad("__module__: megatron.energon\n__class__: Nope\n", "unsupported dataset class");
    check_bad("__class__: CrudeWebdataset\n", "must be given together");
    check_bad("- a\n", "expected a mapping");
    // Base sample fields are valid field_map keys.
    assert!(parse(&format!("{st}field_map: {{image: jpg, caption: txt, __key__: txt}}\n")).is_ok());
}

#[test]
fn field_specs_split_like_energon() {
    check_spec("jpg", &[("jpg", &[])]);
    check_spec("jpg,png", &[("jpg", &[]), ("png", &[])]);
    check_spec("json[caption]", &[("json", &["caption"])]);
    check_spec("json[items][0],txt", &[("json", &["items", "0"]), ("txt", &[])]);
    check_spec("seg.png", &[("seg.png", &[])]);
    // A malformed alternative stands for the whole text, as in the reference.
    check_spec("txt,json[a", &[("txt", &[]), ("txt,json[a", &[])]);
    check_spec("json[]", &[("json[]", &[])]);
    for good in ["jpg", "jpg,png", "json[a][0],txt", "seg.png"] {
        assert_eq!(FieldSpec::parse(good).unwrap(), FieldSpec::parse_lenient(good), "{good:?}");
    }
    for bad in ["", "jpg,", "json[", "json[]", "a]b", "[x]"] {
        assert!(matches!(FieldSpec::parse(bad), Err(Error::Config(_))), "{bad:?}");
    }
    let map = FieldMap::from_pairs([("image", "jpg,png"), ("caption", "json[c],txt")]);
    assert_eq!(map.part_filter().into_iter().collect::<Vec<_>>(), ["jpg", "json", "png", "txt"]);
    assert_eq!(map.get("caption").map(|s| s.raw.as_str()), Some("json[c],txt"));
    assert!(map.get("label").is_none());
}

#[test]
fn list_indices_follow_python() {
    assert_eq!(list_index("0", 3), Some(0));
    assert_eq!(list_index("-1", 3), Some(2));
    assert_eq!(list_index("-3", 3), Some(0));
    assert_eq!(list_index("-4", 3), None);
    assert_eq!(list_index("3", 3), None);
    assert_eq!(list_index(" 1 ", 3), Some(1));
    assert_eq!(list_index("+1", 3), Some(1));
    assert_eq!(list_index("a", 3), None);
    assert_eq!(list_index("0", 0), None);
}

#[test]
fn sample_types_match_the_prepare_menu() {
    let names: Vec<&str> = SAMPLE_TYPES.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "CaptioningSample",
            "ImageClassificationSample",
            "ImageSample",
            "InterleavedSample",
            "MultiChoiceVQASample",
            "OCRSample",
            "Sample",
            "SimilarityInterleavedSample",
            "TextSample",
            "VQASample",
            "VidQASample",
        ]
    );
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "the menu is in Python string order");
    let vqa = sample_type_info("VQASample").unwrap();
    let fields: Vec<&str> = vqa.all_fields().map(|f| f.name).collect();
    assert_eq!(
        fields,
        [
            "__key__",
            "__restore_key__",
            "__subflavors__",
            "__sources__",
            "image",
            "context",
            "answers",
            "answer_weights"
        ]
    );
    assert_eq!(sample_type_info("MultiChoiceVQASample").unwrap().fields[3].default, Some("0"));
    assert!(sample_type_info("VQAOCRSample").is_some());
    assert!(sample_type_info("CrudeWebdataset").is_none());
    for t in SAMPLE_TYPES {
        for f in t.all_fields() {
            assert_eq!(f.optional, f.default.is_some(), "{}.{}", t.name, f.name);
            assert!(!f.type_name.is_empty());
        }
    }
    assert_eq!(sample_type_info("VidQASample").unwrap().fields[0].type_name, "AVDecoder");
    for (class, sample) in LEGACY_CLASSES {
        assert!(sample_type_info(sample).is_some(), "{class}");
    }
}
