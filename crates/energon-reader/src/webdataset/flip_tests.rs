//! Byte flips in every index file (`.tar.idx`, `.info.json`, `split.yaml`, the `index.sqlite`
//! header) give an error or genuine samples, never a panic or wrong bytes under a key.

use std::{collections::BTreeMap, fs};

use energon_index::prepare::{PrepareOptions, prepare_dataset};
use energon_tests::WdsSpec;

use super::*;

type Samples = BTreeMap<(String, String), Vec<(String, Vec<u8>)>>;

/// Every sample of split part `train` that reads; errors are fine, as long as nothing panics.
fn read_all(root: &Path) -> Samples {
    let mut res = Samples::new();
    let Ok(ds) = WebDataset::open(root, &OpenOptions::default()) else {
        return res;
    };
    for i in 0..ds.len().min(1000) {
        if let Ok(Some(s)) = ds.read(i) {
            let parts = s.parts.iter().map(|p| (p.name.clone(), p.data.to_vec())).collect();
            res.insert((s.shard.to_string(), s.key.clone()), parts);
        }
    }
    res
}

#[test]
fn byte_flips_in_index_files_give_errors_or_genuine_samples() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let spec =
        WdsSpec { shards: 2, per_shard: 4, img: 8, subdir: "s".into(), ..WdsSpec::default() };
    energon_tests::write_wds(root, &spec).unwrap();
    prepare_dataset(root, &PrepareOptions::default(), &|_| {}).unwrap();
    let pristine = read_all(root);
    assert_eq!(pristine.len(), 8);

    let files = [
        ("s/data-000000.tar.idx", usize::MAX),
        (".nv-meta/.info.json", usize::MAX),
        (".nv-meta/split.yaml", usize::MAX),
        (".nv-meta/index.sqlite", 100),
    ];
    let mut n_flips = 0;
    for (rel, limit) in files {
        let path = root.join(rel);
        let original = fs::read(&path).unwrap();
        for pos in 0..original.len().min(limit) {
            for mask in [0x01u8, 0x80] {
                let mut bytes = original.clone();
                bytes[pos] ^= mask;
                fs::write(&path, &bytes).unwrap();
                for (at, parts) in read_all(root) {
                    let want = pristine.get(&at);
                    assert_eq!(want, Some(&parts), "{rel} byte {pos} ^ {mask:#x}: sample {at:?}");
                }
                n_flips += 1;
            }
        }
        fs::write(&path, &original).unwrap();
    }
    assert!(n_flips > 300, "{n_flips}");
}
