//! `LoaderSpec`: one description of a loader, from which typed samples of a metadataset come in
//! the reference's order, and where the shard cache size and "is this dataset crude" are decided.

use std::fs;

use energon_cook::{Cooker, DefaultTaskEncoder, Error, LoaderSpec, Opened};
use energon_dist::WorkerConfig;
use energon_mix::prepare_metadataset;
use energon_reader::Sample;

use crate::util::{data, fixture, generated};

#[test]
fn typed_samples_of_a_metadataset_come_in_the_references_order() {
    // The fixture's tar shards (CaptioningSample) blended with its JSONL file (crude, cooked):
    // the reference's batch drops the batches that mix the two types.
    for num_workers in [0, 2] {
        let want = fs::read_to_string(data(&format!(
            "reference-blend-mixed-types-bs4-nw{num_workers}.txt"
        )))
        .unwrap();
        let cfg = WorkerConfig::new(0, 1, num_workers).unwrap();
        let mut spec = LoaderSpec::new(data("blend-mixed-types.yaml"), cfg);
        spec.batch_size = Some(4);
        let cook = Cooker::new(|sample: Sample, _| Ok(sample));
        let encoder = DefaultTaskEncoder::samples().with_cookers(vec![cook]);
        let mut loader = spec.samples().unwrap().task_encoder(encoder).build_batches().unwrap();
        let mut got = Vec::new();
        while got.len() < 80 {
            let batch = loader.next().unwrap().unwrap().value.value;
            let types: Vec<&str> = batch.samples.iter().map(|s| s.value.type_name()).collect();
            assert!(types == ["CaptioningSample"; 4] || types == ["CrudeSample"; 4], "{types:?}");
            got.extend(batch.samples.iter().map(|s| s.value.meta().key.clone()));
        }
        assert_eq!(got, want.lines().collect::<Vec<_>>(), "{num_workers} workers");
    }
}

#[test]
fn a_crude_leaf_without_a_cooker_is_an_error_as_in_the_reference() {
    let spec = LoaderSpec::new(data("blend-mixed-types.yaml"), WorkerConfig::new(0, 1, 0).unwrap());
    let err = match spec.samples().unwrap().build_samples() {
        Err(err) => err,
        Ok(mut loader) => {
            (0..50).find_map(|_| loader.next().unwrap().err()).expect("a crude sample fails")
        }
    };
    assert!(matches!(err, Error::NoCooker { .. }), "{err}");
}

#[test]
fn a_join_is_refused_with_what_to_use_instead() {
    let dir = tempfile::tempdir().unwrap();
    energon_tests::copy_dir(&fixture(), &dir.path().join("ref")).unwrap();
    generated(&dir.path().join("b"), 5, 40, 7);
    let crude = "__module__: megatron.energon\n__class__: CrudeWebdataset\n";
    fs::write(dir.path().join("b/.nv-meta/dataset.yaml"), crude).unwrap();
    let yaml = dir.path().join("join.yaml");
    fs::write(
        &yaml,
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    join:\n      \
         - path: ref\n      - path: b\n    joiner:\n      __module__: megatron.energon\n      \
         __class__: CaptioningSample\n",
    )
    .unwrap();
    prepare_metadataset(&yaml).unwrap();
    let spec = LoaderSpec::new(&yaml, WorkerConfig::new(0, 1, 1).unwrap());
    // The plan and the joined datasets' readers open; only typed samples need the joiner.
    let Opened::Metadataset { leaves, .. } = spec.open().unwrap() else { panic!("a metadataset") };
    assert_eq!(leaves.len(), 1);
    let err = spec.samples().map(drop).unwrap_err();
    assert!(err.to_string().contains("Python package"), "{err}");
}

#[test]
fn a_dataset_with_a_sample_loader_is_crude_alone_and_as_a_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    energon_tests::copy_dir(&fixture(), &root).unwrap();
    fs::write(
        root.join(".nv-meta/loader.yaml"),
        "sample_type:\n  __module__: megatron.energon\n  __class__: CaptioningSample\n\
         sample_loader: loader.py:sample_loader\npart_filter: [jpg, txt]\n",
    )
    .unwrap();
    let cfg = WorkerConfig::new(0, 1, 1).unwrap();
    let mut spec = LoaderSpec::new(&root, cfg);
    spec.dataset_config = Some("loader.yaml".to_owned());
    let Opened::Dataset(reader) = spec.open().unwrap() else { panic!("a dataset") };
    assert!(reader.is_crude());
    let yaml = dir.path().join("meta.yaml");
    fs::write(
        &yaml,
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    \
         path: ds\n    dataset_config: loader.yaml\n",
    )
    .unwrap();
    let plan = LoaderSpec::new(&yaml, cfg).plan().unwrap();
    assert!(plan.leaves[0].crude);
    // The fixture's own dataset.yaml has a field map: not crude, in both places.
    let Opened::Dataset(reader) = LoaderSpec::new(&root, cfg).open().unwrap() else {
        panic!("a dataset")
    };
    assert!(!reader.is_crude());
    let yaml = dir.path().join("plain.yaml");
    fs::write(
        &yaml,
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    path: ds\n",
    )
    .unwrap();
    assert!(!LoaderSpec::new(&yaml, cfg).plan().unwrap().leaves[0].crude);
}

#[test]
fn readers_keep_one_shard_map_per_slice_their_workers_read_at_once() {
    let mut spec = LoaderSpec::new(fixture(), WorkerConfig::new(0, 1, 2).unwrap());
    // Training: 16 slices per worker by default.
    assert_eq!(spec.max_open_shards(), 32);
    spec.parallel_shard_iters = Some(3);
    assert_eq!(spec.max_open_shards(), 6);
    // Validation reads one slice at a time; never fewer than two maps.
    spec.training = false;
    assert_eq!(spec.max_open_shards(), 2);
    spec.worker_config = WorkerConfig::new(0, 1, 4).unwrap();
    assert_eq!(spec.max_open_shards(), 4);
    // The plan's readers follow the same rule.
    assert_eq!(spec.mix_options().max_open_shards(4), spec.max_open_shards());
}
