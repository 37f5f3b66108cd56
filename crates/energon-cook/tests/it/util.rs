//! Helpers: fixture paths, loaders over the reference-prepared fixture, pulling items across passes.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use energon_cook::{Keyed, Loader, LoaderState};
use energon_index::prepare::{PrepareOptions, prepare_dataset};
use energon_reader::{Dataset, OpenOptions};

/// The reference-prepared fixture: 4 shards of 50 samples and a JSONL file of 200 records.
pub(crate) fn fixture() -> PathBuf {
    energon_fixtures::ref_small_dir()
}

/// The reference's recorded outputs for the fixture.
pub(crate) fn expected(name: &str) -> String {
    let path = fixture().with_file_name("energon-ref-small.expected").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// This crate's test data.
pub(crate) fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// energon-mix's test data (metadatasets and the reference's recorded orders of them).
pub(crate) fn mix_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../energon-mix/tests/data").join(name)
}

/// Writes a prepared WebDataset at `dir` whose samples have keys `{key:06}` and one `txt` part,
/// in shards `parts/data-<i>.tar` of `per_shard` samples (the last one shorter), all in `train`,
/// with a `TextSample` dataset.yaml.
pub(crate) fn text_dataset(dir: &Path, keys: impl IntoIterator<Item = u64>, per_shard: usize) {
    let keys: Vec<u64> = keys.into_iter().collect();
    std::fs::create_dir_all(dir.join("parts")).unwrap();
    for (i, chunk) in keys.chunks(per_shard).enumerate() {
        let members: Vec<(String, Vec<u8>)> =
            chunk.iter().map(|k| (format!("{k:06}.txt"), k.to_string().into_bytes())).collect();
        let path = dir.join(format!("parts/data-{i}.tar"));
        energon_tests::write_tar(&path, energon_tests::TarFormat::Ustar, &members).unwrap();
    }
    prepare(dir);
    std::fs::write(
        dir.join(".nv-meta/dataset.yaml"),
        "sample_type:\n  __module__: megatron.energon\n  __class__: TextSample\nfield_map:\n  \
         text: txt\n",
    )
    .unwrap();
}

/// A generated WebDataset (`make-wds` content), prepared with everything in `train`.
pub(crate) fn generated(root: &Path, shards: usize, per_shard: usize, seed: u64) {
    let spec = energon_tests::WdsSpec { shards, per_shard, seed, ..Default::default() };
    energon_tests::write_wds(root, &spec).unwrap();
    prepare(root);
}

fn prepare(root: &Path) {
    let options = PrepareOptions::default().num_workers(1);
    prepare_dataset(root, &options, &|_| {}).unwrap();
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The fixture's tar shards, raw.
pub(crate) fn dataset() -> Arc<Dataset> {
    Arc::new(Dataset::open(&fixture(), &OpenOptions::default()).unwrap())
}

/// What a test compares: each item's restore key and value, or the end of a pass.
pub(crate) type Trace = Vec<String>;

/// Pulls `n` entries from `loader`: items as `key value`, ends of passes as `END` (the next pull
/// starts the next pass).
pub(crate) fn pull<T: std::fmt::Debug>(loader: &mut Loader<Keyed<T>>, n: usize) -> Trace {
    let mut res = Vec::with_capacity(n);
    let mut ends_in_a_row = 0;
    while res.len() < n {
        match loader.next() {
            Some(item) => {
                let item = item.unwrap();
                res.push(format!("{} {:?}", item.value.restore_key, item.value.value));
                ends_in_a_row = 0;
            }
            None => {
                res.push("END".to_owned());
                ends_in_a_row += 1;
                assert!(ends_in_a_row < 3, "the loader yields nothing any more");
            }
        }
    }
    res
}

/// A state through a checkpoint file and back, in the encoding `json` says.
pub(crate) fn through_file(state: LoaderState, json: bool) -> LoaderState {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(if json { "state.json" } else { "state.ckpt" });
    energon_cook::Checkpoint::of_rank(state).write(&path).unwrap();
    let mut read = energon_cook::Checkpoint::read(&path).unwrap();
    assert_eq!(read.ranks.len(), 1);
    read.ranks.pop().unwrap()
}
