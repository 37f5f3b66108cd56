//! Tests of typed reading: every sample type, every field map form, crude samples, subflavors,
//! and the bad inputs a field map can meet.

use std::{fs, io::Cursor, path::PathBuf};

use energon_index::prepare::{PrepareOptions, prepare_dataset};
use image::{ImageFormat, Rgb, RgbImage};
use serde_json::json;

use super::*;
use crate::{
    Decoded,
    decode::{ImageDecode, Tensor, TensorData},
    sample::{FieldValue, OcrSample},
};

fn png(w: u32, h: u32) -> Vec<u8> {
    let img = RgbImage::from_fn(w, h, |x, y| Rgb([x as u8, y as u8, 9]));
    let mut out = Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png).unwrap();
    out.into_inner()
}

fn npy_f32(values: &[f32]) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", values.len());
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend(values.iter().flat_map(|v| v.to_le_bytes()));
    out
}

type Members = Vec<(String, Vec<u8>)>;

/// A prepared one-shard dataset with the given members and `dataset.yaml`.
struct TestSet {
    dir: tempfile::TempDir,
}

impl TestSet {
    fn new(members: Members, dataset_yaml: &str) -> TestSet {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("shards")).unwrap();
        energon_tests::write_tar(
            &dir.path().join("shards/data-0.tar"),
            energon_tests::TarFormat::Ustar,
            &members,
        )
        .unwrap();
        let options = PrepareOptions::default().num_workers(1);
        prepare_dataset(dir.path(), &options, &|_| {}).unwrap();
        fs::write(dir.path().join(".nv-meta/dataset.yaml"), dataset_yaml).unwrap();
        TestSet { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    fn open(&self) -> Result<SampleReader> {
        SampleReader::open(&self.path(), &ReaderOptions::default())
    }

    fn read(&self, i: u64) -> Result<Sample> {
        self.open()?.read(i).map(Option::unwrap)
    }
}

fn member(name: &str, data: impl Into<Vec<u8>>) -> (String, Vec<u8>) {
    (name.to_owned(), data.into())
}

fn typed(class: &str, field_map: &str) -> String {
    format!(
        "sample_type:\n  __module__: megatron.energon\n  __class__: {class}\nfield_map:\n{field_map}"
    )
}

/// Two samples: `a` with a png image and rich json, `b` with a jpg-named png and other json.
fn rich_members() -> Members {
    let json_a = json!({
        "caption": "first", "items": ["x", "y", "z"], "nested": {"deep": [1, 2, 3]},
        "answers": ["yes", "no"], "label": 7, "boxes": [[0, 0, 1, 1]], "idx": [0, 1]
    });
    let json_b = json!({"caption": "second", "items": ["p"], "answers": ["a"], "label": 3});
    vec![
        member("a.png", png(4, 2)),
        member("a.txt", "text a"),
        member("a.json", json_a.to_string()),
        member("a.cls", "5\n"),
        member("a.npy", npy_f32(&[0.5, 0.25])),
        member("a.mp4", b"not really a video".to_vec()),
        member("b.jpg", png(2, 3)),
        member("b.txt", "text b"),
        member("b.json", json_b.to_string()),
        member("b.cls", "6"),
        member("b.npy", npy_f32(&[1.0])),
        member("b.mp4", b"also not a video".to_vec()),
    ]
}

fn image_shape(value: &Tensor) -> Vec<usize> {
    value.shape.clone()
}

#[test]
fn fixture_reads_as_captioning_samples() {
    let reader =
        SampleReader::open(&energon_tests::ref_small_dir(), &ReaderOptions::default()).unwrap();
    assert_eq!(reader.sample_type(), "CaptioningSample");
    assert_eq!(reader.len(), 200);
    for i in 0..200 {
        let Sample::Captioning(s) = reader.read(i).unwrap().unwrap() else { panic!() };
        let raw = reader.dataset().read(i).unwrap().unwrap();
        assert_eq!(s.meta.key, format!("{i:08}"));
        assert_eq!(s.meta.restore_key, ("Webdataset", i));
        assert_eq!(s.meta.subflavors, None);
        assert_eq!(s.meta.sources, [raw.source_info()]);
        assert_eq!(image_shape(&s.image), [32, 32, 3]);
        assert_eq!(s.caption.as_bytes(), &raw.part("txt").unwrap()[..]);
        // Only the mapped parts are read.
        let names: Vec<_> = raw.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["jpg", "txt"]);
    }
}

#[test]
fn alternatives_take_the_first_part_present() {
    let set = TestSet::new(rich_members(), &typed("ImageSample", "  image: jpg,png\n"));
    let Sample::Image(a) = set.read(0).unwrap() else { panic!() };
    assert_eq!(image_shape(&a.image), [2, 4, 3]);
    let Sample::Image(b) = set.read(1).unwrap() else { panic!() };
    assert_eq!(image_shape(&b.image), [3, 2, 3]);
}

#[test]
fn accessors_index_into_json() {
    let set = TestSet::new(
        rich_members(),
        &typed(
            "VQASample",
            "  image: png,jpg\n  context: json[items][-1]\n  answers: json[answers]\n  \
             answer_weights: json[nested][deep],json[label]\n",
        ),
    );
    let Sample::Vqa(a) = set.read(0).unwrap() else { panic!() };
    assert_eq!(a.context, "z");
    assert_eq!(a.answers, Some(vec!["yes".to_owned(), "no".to_owned()]));
    assert_eq!(a.answer_weights, Some(Decoded::Json(json!([1, 2, 3]))));
    let Sample::Vqa(b) = set.read(1).unwrap() else { panic!() };
    assert_eq!(b.context, "p");
    // `nested` is missing in b: the second alternative applies.
    assert_eq!(b.answer_weights, Some(Decoded::Json(json!(3))));
}

#[test]
fn every_sample_type_builds_with_the_reference_field_names() {
    let cases: &[(&str, &str)] = &[
        ("Sample", "  {}\n"),
        ("CaptioningSample", "  image: png,jpg\n  caption: txt\n"),
        ("ImageSample", "  image: png,jpg\n"),
        (
            "ImageClassificationSample",
            "  image: png,jpg\n  label: cls\n  label_name: json[caption]\n",
        ),
        ("InterleavedSample", "  sequence: json[items]\n"),
        (
            "MultiChoiceVQASample",
            "  image: png,jpg\n  context: txt\n  choices: json[answers]\n  correct_choice_idx: json[label]\n",
        ),
        (
            "OCRSample",
            "  image: png,jpg\n  text: txt\n  words_boxes: json[boxes],npy\n  words_text: json[items]\n",
        ),
        (
            "SimilarityInterleavedSample",
            "  images: png,jpg\n  texts: json[items]\n  similarity_matrix: npy\n",
        ),
        ("TextSample", "  text: json[caption]\n"),
        (
            "VQASample",
            "  image: png,jpg\n  context: txt\n  answers: json[answers]\n  answer_weights: npy\n",
        ),
        (
            "VQAOCRSample",
            "  image: png,jpg\n  context: txt\n  text: json[caption]\n  words_text: json[items]\n",
        ),
        ("VidQASample", "  video: mp4\n  context: txt\n  answers: json[answers]\n"),
    ];
    for (class, field_map) in cases {
        let set = TestSet::new(rich_members(), &typed(class, field_map));
        let reader = set.open().unwrap();
        assert_eq!(reader.sample_type(), *class);
        for i in 0..2 {
            let sample = reader.read(i).unwrap().unwrap();
            assert_eq!(sample.type_name(), *class);
            assert_eq!(sample.key(), ["a", "b"][i as usize]);
            // The fields are those of energon-index's table of sample types, in order.
            let info = energon_index::dataset_config::sample_type_info(class).unwrap();
            let names: Vec<&str> = sample.fields().iter().map(|(n, _)| *n).collect();
            let expected: Vec<&str> = info.fields.iter().map(|f| f.name).collect();
            assert_eq!(names, expected, "{class}");
        }
    }
}

#[test]
fn typed_fields_hold_the_decoded_values() {
    let set = TestSet::new(
        rich_members(),
        &typed("ImageClassificationSample", "  image: png,jpg\n  label: cls\n  label_name: txt\n"),
    );
    let Sample::ImageClassification(s) = set.read(1).unwrap() else { panic!() };
    assert_eq!((s.label, s.label_name.as_deref()), (Some(6), Some("text b")));
    let set = TestSet::new(
        rich_members(),
        &typed("OCRSample", "  image: png,jpg\n  text: txt\n  words_boxes: npy\n"),
    );
    let Sample::Ocr(OcrSample { words_boxes, chars_text, .. }) = set.read(0).unwrap() else {
        panic!()
    };
    let Some(Decoded::Tensor(t)) = words_boxes else { panic!() };
    assert_eq!(t.data, TensorData::F32(vec![0.5, 0.25]));
    assert_eq!(chars_text, None);
    let set = TestSet::new(rich_members(), &typed("VidQASample", "  video: mp4\n  context: txt\n"));
    let Sample::VidQa(s) = set.read(0).unwrap() else { panic!() };
    let Decoded::Video(video) = &s.video else { panic!("{:?}", s.video) };
    assert_eq!(&video.data[..], b"not really a video");
    assert_eq!(s.fields()[0].1, FieldValue::Decoded(&s.video));
    let set = TestSet::new(
        rich_members(),
        &typed("MultiChoiceVQASample", "  image: png,jpg\n  context: txt\n"),
    );
    let Sample::MultiChoiceVqa(s) = set.read(0).unwrap() else { panic!() };
    assert_eq!((s.correct_choice_idx, s.choices), (0, None));
}

#[test]
fn a_part_used_by_two_fields_is_decoded_for_both() {
    let set = TestSet::new(
        rich_members(),
        &typed(
            "VQASample",
            "  image: png,jpg\n  context: json[caption]\n  answers: json[answers]\n",
        ),
    );
    let Sample::Vqa(s) = set.read(0).unwrap() else { panic!() };
    assert_eq!((s.context.as_str(), s.answers.unwrap().len()), ("first", 2));
    let set = TestSet::new(
        rich_members(),
        &typed("CaptioningSample", "  image: png,jpg\n  caption: __key__\n"),
    );
    let Sample::Captioning(s) = set.read(1).unwrap() else { panic!() };
    assert_eq!(s.caption, "b");
}

#[test]
fn missing_part_is_a_field_error_with_its_location() {
    let set =
        TestSet::new(rich_members(), &typed("CaptioningSample", "  image: png\n  caption: txt\n"));
    assert!(set.read(0).is_ok());
    let err = set.read(1).unwrap_err();
    let Error::Field { at, field, spec, reason } = &err else { panic!("{err}") };
    assert_eq!((field.as_str(), spec.as_str()), ("image", "png"));
    assert_eq!(
        (at.shard.as_str(), at.key.as_deref(), at.index),
        ("shards/data-0.tar", Some("b"), Some(1))
    );
    assert!(at.offset > 0);
    assert!(reason.contains("no part \"png\""), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("data-0.tar") && msg.contains("key b") && msg.contains("byte offset"),
        "{msg}"
    );
}

#[test]
fn missing_key_and_wrong_type_are_field_errors() {
    let set = TestSet::new(rich_members(), &typed("TextSample", "  text: json[nested][deep][5]\n"));
    let err = set.read(0).unwrap_err();
    assert!(
        matches!(&err, Error::Field { reason, .. } if reason.contains("no list index [5]")),
        "{err}"
    );
    let set = TestSet::new(rich_members(), &typed("TextSample", "  text: json[label]\n"));
    let err = set.read(0).unwrap_err();
    assert!(
        matches!(&err, Error::Field { reason, .. } if reason.contains("expected a string")),
        "{err}"
    );
    let set = TestSet::new(rich_members(), &typed("TextSample", "  text: txt[0]\n"));
    let err = set.read(0).unwrap_err();
    assert!(matches!(&err, Error::Field { reason, .. } if reason.contains("not JSON")), "{err}");
    let set = TestSet::new(rich_members(), &typed("CaptioningSample", "  image: png,jpg\n"));
    let err = set.read(0).unwrap_err();
    assert!(matches!(&err, Error::Field { field, .. } if field == "caption"), "{err}");
}

#[test]
fn undecodable_parts_are_decode_errors_at_the_part_offset() {
    let members = vec![
        member("a.jpg", b"garbage".to_vec()),
        member("a.txt", "t"),
        member("b.jpg", png(1, 1)),
        member("b.json", "{not json"),
    ];
    let set =
        TestSet::new(members, &typed("CaptioningSample", "  image: jpg\n  caption: txt,json[x]\n"));
    let err = set.read(0).unwrap_err();
    let Error::Decode { at, part, .. } = &err else { panic!("{err}") };
    // a.jpg is the first member: its data starts after one header block.
    assert_eq!((part.as_str(), at.offset, at.key.as_deref()), ("jpg", 512, Some("a")));
    let err = set.read(1).unwrap_err();
    let Error::Decode { part, reason, .. } = &err else { panic!("{err}") };
    assert_eq!(part, "json");
    assert!(reason.contains("invalid JSON"), "{err}");
}

#[test]
fn crude_samples_hold_every_part_in_tar_order() {
    let set = TestSet::new(
        rich_members(),
        "__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors:\n  source: web\n",
    );
    let reader = set.open().unwrap();
    assert_eq!(reader.sample_type(), "CrudeSample");
    let Sample::Crude(s) = reader.read(0).unwrap().unwrap() else { panic!() };
    let names: Vec<&str> = s.parts.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["png", "txt", "json", "cls", "npy", "mp4"]);
    assert_eq!(s.get("cls"), Some(&Decoded::Int(5)));
    assert_eq!(s.get("txt"), Some(&Decoded::Text("text a".into())));
    assert!(matches!(s.get("mp4"), Some(Decoded::Video(_))));
    assert_eq!(&*s.shard, "shards/data-0.tar");
    assert_eq!(s.meta.subflavors.as_deref().unwrap()["source"], "web");
}

#[test]
fn crude_part_filter_reads_only_those_parts() {
    let set = TestSet::new(
        rich_members(),
        "__module__: megatron.energon\n__class__: CrudeWebdataset\npart_filter: [txt, cls]\n",
    );
    let Sample::Crude(s) = set.read(1).unwrap() else { panic!() };
    assert_eq!(
        s.parts,
        [("txt".into(), Decoded::Text("text b".into())), ("cls".into(), Decoded::Int(6))]
    );
}

#[test]
fn subflavors_from_the_caller_unless_dataset_yaml_has_its_own() {
    let mut caller = Map::new();
    caller.insert("from".into(), json!("caller"));
    let options = ReaderOptions { subflavors: Some(caller), ..ReaderOptions::default() };
    let set = TestSet::new(rich_members(), &typed("TextSample", "  text: txt\n"));
    let s = SampleReader::open(&set.path(), &options).unwrap().read(0).unwrap().unwrap();
    assert_eq!(s.meta().subflavors.as_deref().unwrap()["from"], "caller");
    let set = TestSet::new(
        rich_members(),
        &format!("{}subflavors:\n  from: yaml\n", typed("TextSample", "  text: txt\n")),
    );
    let s = SampleReader::open(&set.path(), &options).unwrap().read(0).unwrap().unwrap();
    assert_eq!(s.meta().subflavors.as_deref().unwrap()["from"], "yaml");
}

#[test]
fn legacy_classes_build_their_sample_type() {
    let set = TestSet::new(
        rich_members(),
        "__module__: megatron.energon\n__class__: TextWebdataset\nfield_map:\n  text: txt\n",
    );
    let Sample::Text(s) = set.read(0).unwrap() else { panic!() };
    assert_eq!(s.text, "text a");
}

#[test]
fn custom_loaders_fall_back_to_crude_samples_of_their_part_filter() {
    let set = TestSet::new(
        rich_members(),
        "sample_type:\n  __module__: megatron.energon\n  __class__: TextSample\n\
         sample_loader: sample_loader.py:sample_loader\npart_filter: [txt]\n",
    );
    let reader = set.open().unwrap();
    assert_eq!(reader.custom_loader(), Some("sample_loader.py:sample_loader"));
    let Sample::Crude(s) = reader.read(0).unwrap().unwrap() else { panic!() };
    assert_eq!(s.parts.len(), 1);
}

#[test]
fn python_sample_types_give_their_fields_and_missing_configs_are_unsupported() {
    let set = TestSet::new(
        rich_members(),
        "sample_type:\n  __module__: my.module\n  __class__: MySample\nfield_map:\n  text: txt\n",
    );
    let reader = set.open().unwrap();
    assert_eq!(reader.sample_type(), "MySample");
    let class = reader.sample_class().unwrap();
    assert_eq!((class.module.as_str(), class.class.as_str()), ("my.module", "MySample"));
    let Sample::Fields(s) = reader.read(0).unwrap().unwrap() else { panic!() };
    assert_eq!(s.fields.len(), 1);
    assert!(matches!(&s.fields[0], (name, Decoded::Text(_)) if name == "text"));
    fs::remove_file(set.path().join(".nv-meta/dataset.yaml")).unwrap();
    assert!(matches!(set.open().unwrap_err(), Error::Unsupported { .. }));
}

#[test]
fn dataset_yaml_can_override_the_split_part() {
    let set = TestSet::new(
        rich_members(),
        &format!("{}split_part: train\n", typed("TextSample", "  text: txt\n")),
    );
    let options = ReaderOptions { split_part: "val".into(), ..ReaderOptions::default() };
    let reader = SampleReader::open(&set.path(), &options).unwrap();
    assert_eq!(reader.len(), 2);
}

#[test]
fn without_a_decoder_parts_stay_bytes() {
    let options = ReaderOptions { decoder: None, ..ReaderOptions::default() };
    let set =
        TestSet::new(rich_members(), "__module__: megatron.energon\n__class__: CrudeWebdataset\n");
    let s = SampleReader::open(&set.path(), &options).unwrap().read(0).unwrap().unwrap();
    assert!(s.as_crude().unwrap().parts.iter().all(|(_, v)| matches!(v, Decoded::Bytes(_))));
    let set = TestSet::new(rich_members(), &typed("TextSample", "  text: txt\n"));
    let err = SampleReader::open(&set.path(), &options).unwrap().read(0).unwrap_err();
    assert!(matches!(err, Error::Field { .. }), "{err}");
}

#[test]
fn image_decode_mode_applies_to_typed_samples() {
    let options = ReaderOptions {
        decoder: Some(Decoder { image: ImageDecode::TorchRgb, ..Decoder::default() }),
        ..ReaderOptions::default()
    };
    let reader = SampleReader::open(&energon_tests::ref_small_dir(), &options).unwrap();
    let Sample::Captioning(s) = reader.read(3).unwrap().unwrap() else { panic!() };
    assert_eq!((s.image.shape.as_slice(), s.image.dtype()), (&[3, 32, 32][..], "float32"));
}

#[test]
fn jsonl_files_read_as_crude_json_samples() {
    let path = energon_tests::ref_small_dir().join("jsonl/data.jsonl");
    let reader = SampleReader::open(&path, &ReaderOptions::default()).unwrap();
    assert_eq!((reader.sample_type(), reader.len()), ("CrudeSample", 200));
    let Sample::Crude(s) = reader.read(42).unwrap().unwrap() else { panic!() };
    assert_eq!(s.meta.key, "42");
    let Some(Decoded::Json(v)) = s.get("json") else { panic!() };
    assert_eq!(v["key"], "00000042");
}

/// Parts over a decoder limit and corrupt audio are errors naming the dataset, shard and key, in
/// reads and in `energon lint`.
#[test]
fn bombs_and_corrupt_audio_are_typed_errors_in_reads_and_lint() {
    let flac =
        fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tone.flac"))
            .unwrap();
    let members = vec![
        member("a.png", crate::decode::limit_tests::black_png(20000)),
        member("b.flac", flac[..flac.len() * 9 / 10].to_vec()),
        member("c.png", png(2, 2)),
    ];
    let set = TestSet::new(members, "__module__: megatron.energon\n__class__: CrudeWebdataset\n");
    let reader = set.open().unwrap();
    let err = reader.read(0).unwrap_err();
    let Error::TooLarge { at, part, limit, reason } = &err else { panic!("{err}") };
    assert_eq!(
        (part.as_str(), *limit, at.key.as_deref()),
        ("png", crate::Limit::ImagePixels, Some("a"))
    );
    assert_eq!((at.dataset.as_path(), at.shard.as_str()), (set.dir.path(), "shards/data-0.tar"));
    assert!(reason.contains("decompression bomb"), "{reason}");
    let err = reader.read(1).unwrap_err();
    let Error::Decode { at, part, reason } = &err else { panic!("{err}") };
    assert_eq!((part.as_str(), at.key.as_deref()), ("flac", Some("b")));
    assert!(!reason.is_empty());
    let report = crate::lint::lint_samples(&reader, 1, &|_| {}).unwrap();
    let keys: Vec<Option<&str>> = report
        .problems
        .iter()
        .map(|p| p.error.sample_at().and_then(|a| a.key.as_deref()))
        .collect();
    assert_eq!(keys, [Some("a"), Some("b")]);
}
