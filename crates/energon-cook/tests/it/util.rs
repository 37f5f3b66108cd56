//! Helpers: fixture paths, loaders over the reference-prepared fixture, pulling items across passes.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use energon_cook::{Keyed, Loader, LoaderState};
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
