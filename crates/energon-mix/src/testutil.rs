//! Test helpers: small prepared text datasets like the reference's own tests build, fixture
//! paths, and metadataset files.

use std::{
    fs,
    path::{Path, PathBuf},
};

use energon_index::prepare::{PrepareOptions, prepare_dataset};

use crate::resolve::normalize;

/// The reference-prepared fixture (4 shards of 50 samples, `train` only), normalized.
pub(crate) fn ref_small() -> PathBuf {
    normalize(&energon_tests::ref_small_dir())
}

/// Writes a prepared WebDataset at `dir` whose samples have keys `{key:06}` and one `txt` part,
/// in shards `parts/data-<i>.tar` of `per_shard` samples (the last one shorter), all in `train`,
/// with a `TextSample` dataset.yaml carrying `subflavors`.
pub(crate) fn text_dataset(dir: &Path, keys: impl IntoIterator<Item = u64>, per_shard: usize) {
    let keys: Vec<u64> = keys.into_iter().collect();
    fs::create_dir_all(dir.join("parts")).unwrap();
    for (i, chunk) in keys.chunks(per_shard).enumerate() {
        let members: Vec<(String, Vec<u8>)> =
            chunk.iter().map(|k| (format!("{k:06}.txt"), k.to_string().into_bytes())).collect();
        energon_tests::write_tar(
            &dir.join(format!("parts/data-{i}.tar")),
            energon_tests::TarFormat::Ustar,
            &members,
        )
        .unwrap();
    }
    let options = PrepareOptions::default().num_workers(1);
    prepare_dataset(dir, &options, &|_| {}).unwrap();
    fs::write(
        dir.join(".nv-meta/dataset.yaml"),
        "sample_type:\n  __module__: megatron.energon\n  __class__: TextSample\nfield_map:\n  \
         text: txt\nsubflavors:\n  source: dataset.yaml\n  dataset.yaml: true\n  number: 42\n",
    )
    .unwrap();
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, text).unwrap();
    path
}
