//! Tests of WebDataset reading: the reference fixture byte for byte, excludes, part filters,
//! broken shards and indexes, and concurrent reads.

use std::{fs, io::Read, path::Path, sync::Arc};

use proptest::prelude::*;

use super::*;

fn fixture() -> PathBuf {
    energon_tests::ref_small_dir()
}

/// A writable copy of the fixture.
fn fixture_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    energon_tests::copy_dir(&fixture(), dir.path()).unwrap();
    dir
}

type Parts = Vec<(String, Vec<u8>)>;

/// The samples of a shard as the `tar` crate reads them: (key, [(part, bytes)]) in tar order.
fn tar_crate_samples(path: &Path) -> Vec<(String, Parts)> {
    let mut archive = tar::Archive::new(fs::File::open(path).unwrap());
    let mut res: Vec<(String, Parts)> = Vec::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let (key, part) = name.split_once('.').unwrap();
        let (key, part) = (key.to_owned(), part.to_owned());
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        match res.last_mut() {
            Some((k, parts)) if *k == key => parts.push((part, data)),
            _ => res.push((key, vec![(part, data)])),
        }
    }
    res
}

fn open(root: &Path) -> WebDataset {
    WebDataset::open(root, &OpenOptions::default()).unwrap()
}

fn parts_of(sample: &RawSample) -> Vec<(String, Vec<u8>)> {
    sample.parts.iter().map(|p| (p.name.clone(), p.data.to_vec())).collect()
}

#[test]
fn every_fixture_sample_matches_the_tar_crate() {
    let ds = open(&fixture());
    assert_eq!(ds.len(), 200);
    assert_eq!(ds.shard_counts(), [50, 50, 50, 50]);
    let mut index = 0;
    for name in ds.shard_names() {
        let expected = tar_crate_samples(&fixture().join(&*name));
        assert_eq!(expected.len(), 50);
        for (key, parts) in expected {
            let sample = ds.read(index).unwrap().unwrap();
            assert_eq!(sample.key, key);
            assert_eq!(&*sample.shard, &*name);
            assert_eq!(sample.index, index);
            assert_eq!(sample.restore_key(), ("Webdataset", index));
            assert_eq!(parts_of(&sample), parts, "sample {index}");
            // The offsets are where the bytes lie in the shard.
            let shard = fs::read(fixture().join(&*name)).unwrap();
            for part in &sample.parts {
                let at = part.offset as usize;
                assert_eq!(&shard[at..at + part.data.len()], &part.data[..]);
            }
            index += 1;
        }
    }
}

#[test]
fn parts_have_the_offsets_of_index_sqlite() {
    // From the fixture's dump: sample 1 of shard 0 has jpg at 4096 (1117 bytes), txt at 6144.
    let ds = open(&fixture());
    let sample = ds.read(1).unwrap().unwrap();
    let got: Vec<(&str, u64, usize)> =
        sample.parts.iter().map(|p| (p.name.as_str(), p.offset, p.data.len())).collect();
    assert_eq!(got, [("jpg", 4096, 1117), ("txt", 6144, 19), ("json", 7168, 123)]);
    assert_eq!(sample.offset, 3584);
}

#[test]
fn source_info_names_the_member_files() {
    let ds = open(&fixture());
    let source = ds.read(51).unwrap().unwrap().source_info();
    assert_eq!(&*source.shard_name, "shards/data-000001.tar");
    assert_eq!(source.index, crate::SourceIndex::Index(51));
    assert_eq!(source.file_names, ["00000051.jpg", "00000051.txt", "00000051.json"]);
    assert_eq!(&*source.dataset_path, fixture().as_path());
}

#[test]
fn part_filter_reads_only_the_named_parts() {
    let options = OpenOptions { part_filter: PartFilter::names(["txt"]), ..Default::default() };
    let ds = WebDataset::open(&fixture(), &options).unwrap();
    let sample = ds.read(7).unwrap().unwrap();
    assert_eq!(sample.key, "00000007");
    assert_eq!(sample.parts.len(), 1);
    assert_eq!(sample.parts[0].name, "txt");
    let none = OpenOptions { part_filter: PartFilter::names(["png"]), ..Default::default() };
    let sample = WebDataset::open(&fixture(), &none).unwrap().read(7).unwrap().unwrap();
    assert_eq!(sample.key, "00000007");
    assert!(sample.parts.is_empty());
    let pred = OpenOptions {
        part_filter: PartFilter::Predicate(Arc::new(|p: &str| p.starts_with('j'))),
        ..Default::default()
    };
    let sample = WebDataset::open(&fixture(), &pred).unwrap().read(7).unwrap().unwrap();
    let names: Vec<_> = sample.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["jpg", "json"]);
}

fn write_split(root: &Path, text: &str) {
    fs::write(root.join(".nv-meta/split.yaml"), text).unwrap();
}

#[test]
fn excludes_drop_shards_and_skip_samples_that_still_count() {
    let dir = fixture_copy();
    write_split(
        dir.path(),
        "split_parts:\n  train:\n  - shards/data-{000000..000003}.tar\nexclude:\n\
         - shards/data-000001.tar\n- shards/data-000000.tar/0000000{3..5}\n",
    );
    let ds = open(dir.path());
    assert_eq!(ds.shard_counts(), [50, 50, 50]);
    assert_eq!(ds.len(), 150);
    let keys: Vec<Option<String>> = (0..8).map(|i| ds.read(i).unwrap().map(|s| s.key)).collect();
    let expected: Vec<Option<String>> =
        (0..8).map(|i| (!(3..=5).contains(&i)).then(|| format!("{i:08}"))).collect();
    assert_eq!(keys, expected);
    // Shard 1 is gone: global index 50 is the first sample of shard 2.
    assert_eq!(ds.read(50).unwrap().unwrap().key, "00000100");
    assert_eq!(ds.read(149).unwrap().unwrap().key, "00000199");
}

#[test]
fn split_order_defines_global_indices() {
    let dir = fixture_copy();
    write_split(
        dir.path(),
        "split_parts:\n  train:\n  - shards/data-000002.tar\n  - shards/data-000000.tar\n  val:\n  \
         - shards/data-000003.tar\n",
    );
    let ds = open(dir.path());
    assert_eq!(ds.read(0).unwrap().unwrap().key, "00000100");
    assert_eq!(ds.read(50).unwrap().unwrap().key, "00000000");
    let val = OpenOptions { split_part: "val".into(), ..Default::default() };
    let ds = WebDataset::open(dir.path(), &val).unwrap();
    assert_eq!(ds.len(), 50);
    assert_eq!(ds.read(0).unwrap().unwrap().key, "00000150");
    let test = OpenOptions { split_part: "test".into(), ..Default::default() };
    let err = WebDataset::open(dir.path(), &test).unwrap_err();
    assert!(matches!(err, Error::Index(energon_index::Error::UnknownSplitPart { .. })), "{err}");
}

#[test]
fn out_of_range_is_an_error() {
    let err = open(&fixture()).read(200).unwrap_err();
    assert!(matches!(err, Error::OutOfRange { index: 200, len: 200, .. }), "{err}");
}

#[test]
fn truncated_shard_is_refused_naming_both_sizes() {
    let dir = fixture_copy();
    let shard = dir.path().join("shards/data-000003.tar");
    let bytes = fs::read(&shard).unwrap();
    fs::write(&shard, &bytes[..100_000]).unwrap();
    let ds = open(dir.path());
    assert!(ds.read(149).is_ok());
    // The shard is checked against its .tar.idx end offset when it is first used.
    let err = ds.read(150).unwrap_err();
    let Error::ShardChanged { at, index, reason } = &err else { panic!("{err}") };
    assert_eq!(at.shard, "shards/data-000003.tar");
    assert!(index.ends_with("data-000003.tar.idx"), "{err}");
    assert!(reason.contains("100000 bytes") && reason.contains("188928"), "{err}");
    assert!(ds.read(199).is_err());
    assert_eq!(ds.check_shards().len(), 1);
}

#[test]
fn flipped_header_byte_is_a_corrupt_sample_naming_key_and_offset() {
    let dir = fixture_copy();
    let shard = dir.path().join("shards/data-000000.tar");
    let mut bytes = fs::read(&shard).unwrap();
    // Sample 1's txt member header is at 5632 (its data at 6144); damage its name.
    bytes[5632 + 3] ^= 0x55;
    fs::write(&shard, &bytes).unwrap();
    let ds = open(dir.path());
    assert!(ds.read(0).is_ok());
    let err = ds.read(1).unwrap_err();
    let Error::CorruptSample { at, .. } = &err else { panic!("{err}") };
    assert_eq!((at.key.as_deref(), at.offset, at.index), (Some("00000001"), 5632, Some(1)));
    assert!(err.to_string().contains("checksum"), "{err}");
    assert!(ds.read(2).is_ok());
}

#[test]
fn index_of_another_shard_is_detected() {
    let dir = fixture_copy();
    let shards = dir.path().join("shards");
    // Shard 1's index on shard 0: same count, other offsets.
    fs::copy(shards.join("data-000001.tar.idx"), shards.join("data-000000.tar.idx")).unwrap();
    let ds = open(dir.path());
    let err = ds.read(0).unwrap_err();
    // index.sqlite and the .tar.idx disagree: the error names both files.
    let Error::Index(energon_index::Error::Inconsistent { first, second, .. }) = &err else {
        panic!("{err}")
    };
    assert!(first.ends_with("index.sqlite") && second.ends_with("data-000000.tar.idx"), "{err}");

    // Without index.sqlite the per-read header checks still catch it.
    fs::remove_file(dir.path().join(".nv-meta/index.sqlite")).unwrap();
    let ds = open(dir.path());
    let errors: Vec<Error> = (0..50).filter_map(|i| ds.read(i).err()).collect();
    assert!(!errors.is_empty());
    for err in &errors {
        assert!(matches!(err, Error::CorruptSample { .. } | Error::ShardChanged { .. }), "{err}");
    }
}

#[test]
fn shifted_index_puts_two_samples_in_one_range() {
    let dir = fixture_copy();
    let idx_path = dir.path().join("shards/data-000000.tar.idx");
    let mut idx = fs::read(&idx_path).unwrap();
    // Entry 2 (sample 2's start) := sample 3's start: sample 1's range now holds sample 2 too.
    let entry3: [u8; 8] = idx[24..32].try_into().unwrap();
    idx[16..24].copy_from_slice(&entry3);
    fs::write(&idx_path, &idx).unwrap();
    let err = open(dir.path()).read(1).unwrap_err();
    let Error::CorruptSample { at, reason } = &err else { panic!("{err}") };
    assert_eq!(at.key.as_deref(), Some("00000001"));
    assert!(reason.contains("another sample"), "{err}");
}

#[test]
fn index_with_wrong_count_is_an_index_mismatch() {
    let dir = fixture_copy();
    let idx_path = dir.path().join("shards/data-000002.tar.idx");
    let idx = fs::read(&idx_path).unwrap();
    fs::write(&idx_path, &idx[..idx.len() - 8]).unwrap();
    let ds = open(dir.path());
    assert!(ds.read(0).is_ok());
    let err = ds.read(100).unwrap_err();
    assert!(
        matches!(&err, Error::IndexMismatch { shard, .. } if shard == "shards/data-000002.tar")
    );
    assert!(err.to_string().contains("49 samples"), "{err}");
    assert_eq!(ds.check_shards().len(), 1);
}

#[test]
fn missing_shard_and_missing_index_are_typed() {
    let dir = fixture_copy();
    fs::remove_file(dir.path().join("shards/data-000001.tar")).unwrap();
    fs::remove_file(dir.path().join("shards/data-000002.tar.idx")).unwrap();
    let ds = open(dir.path());
    let err = ds.read(60).unwrap_err();
    assert!(matches!(&err, Error::MissingShard { shard, .. } if shard == "shards/data-000001.tar"));
    let err = ds.read(120).unwrap_err();
    assert!(matches!(&err, Error::IndexMismatch { reason, .. } if reason.contains("missing")));
    assert_eq!(ds.check_shards().len(), 2);
    assert!(open(&fixture()).check_shards().is_empty());
}

#[test]
fn gzip_shard_is_reported_as_compressed() {
    let dir = fixture_copy();
    let shard = dir.path().join("shards/data-000000.tar");
    let mut bytes = fs::read(&shard).unwrap();
    bytes[..2].copy_from_slice(&[0x1f, 0x8b]);
    fs::write(&shard, &bytes).unwrap();
    let err = open(dir.path()).read(0).unwrap_err();
    assert!(matches!(err, Error::Index(energon_index::Error::CompressedTar { .. })), "{err}");
}

#[test]
fn concurrent_reads_with_one_open_map_agree() {
    let options = OpenOptions { max_open_shards: 1, ..Default::default() };
    let ds = Arc::new(WebDataset::open(&fixture(), &options).unwrap());
    let reference: Vec<RawSample> = (0..200).map(|i| ds.read(i).unwrap().unwrap()).collect();
    let reference = Arc::new(reference);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let ds = ds.clone();
            let reference = reference.clone();
            std::thread::spawn(move || {
                for round in 0..3u64 {
                    for i in 0..200u64 {
                        let i = (i * 37 + t * 11 + round * 5) % 200;
                        assert_eq!(ds.read(i).unwrap().unwrap(), reference[i as usize]);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(ds.maps.n_open(), 1);
}

#[test]
fn parts_outlive_the_dataset_and_its_cache() {
    let sample = {
        let options = OpenOptions { max_open_shards: 1, ..Default::default() };
        let ds = WebDataset::open(&fixture(), &options).unwrap();
        let sample = ds.read(0).unwrap().unwrap();
        ds.read(199).unwrap();
        sample
    };
    assert_eq!(sample.part("txt").unwrap().len(), 21);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Any access order and cache size reads the same samples as a sequential pass.
    #[test]
    fn random_access_equals_sequential(
        order in proptest::collection::vec(0u64..200, 1..60),
        max_open in 1usize..5,
    ) {
        let ds = WebDataset::open(&fixture(), &OpenOptions { max_open_shards: max_open, ..Default::default() }).unwrap();
        for i in order {
            let sample = ds.read(i).unwrap().unwrap();
            prop_assert_eq!(sample.key, format!("{i:08}"));
            prop_assert_eq!(sample.parts.len(), 3);
        }
        prop_assert!(ds.maps.n_open() <= max_open);
    }
}

#[test]
fn an_excluded_damaged_sample_is_skipped_without_parsing_it() {
    let dir = fixture_copy();
    let shard = dir.path().join("shards/data-000000.tar");
    let mut bytes = fs::read(&shard).unwrap();
    // Damage sample 1's txt header (its first member, the jpg, is intact).
    bytes[5632 + 3] ^= 0x55;
    fs::write(&shard, &bytes).unwrap();
    assert!(open(dir.path()).read(1).is_err());
    write_split(
        dir.path(),
        "split_parts:\n  train:\n  - shards/data-{000000..000003}.tar\nexclude:\n\
         - shards/data-000000.tar/00000001\n",
    );
    assert_eq!(open(dir.path()).read(1).unwrap(), None);
}

/// A dataset of one shard `data.tar` written with the `tar` crate by `build`, prepared by
/// energon-index.
fn tar_dataset(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    build(&mut builder);
    fs::write(dir.path().join("data.tar"), builder.into_inner().unwrap()).unwrap();
    let options = energon_index::prepare::PrepareOptions::default();
    energon_index::prepare::prepare_dataset(dir.path(), &options, &|_| {}).unwrap();
    dir
}

fn append_file(builder: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]) {
    let mut header = tar::Header::new_ustar();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    builder.append_data(&mut header, name, data).unwrap();
}

#[test]
fn a_global_pax_header_before_a_sample_is_skipped() {
    let global = |b: &mut tar::Builder<Vec<u8>>| {
        let records = b"18 comment=global\n";
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::XGlobalHeader);
        header.set_path("pax_global_header").unwrap();
        header.set_size(records.len() as u64);
        header.set_cksum();
        b.append(&header, &records[..]).unwrap();
    };
    // Before the first sample, and between two samples (the end of the first one's range).
    let dir = tar_dataset(|b| {
        global(b);
        append_file(b, "a.txt", b"first");
        global(b);
        append_file(b, "b.txt", b"second");
    });
    let ds = open(dir.path());
    assert_eq!(ds.len(), 2);
    for (i, (key, data)) in [("a", "first"), ("b", "second")].into_iter().enumerate() {
        let sample = ds.read(i as u64).unwrap().unwrap();
        assert_eq!(sample.key, key);
        assert_eq!(parts_of(&sample), [("txt".to_owned(), data.as_bytes().to_vec())]);
    }
}

#[test]
fn the_file_store_refuses_a_repeated_part_as_the_loader_does() {
    let dir = tar_dataset(|b| {
        append_file(b, "k.jpg", b"one");
        append_file(b, "k.jpg", b"two");
        append_file(b, "m.txt", b"next");
    });
    let store = crate::WebdatasetFileStore::open(dir.path()).unwrap();
    let err = crate::FileStore::get(&store, "k.jpg").unwrap_err();
    let Error::CorruptSample { at, reason } = &err else { panic!("{err:?}") };
    assert_eq!((at.key.as_deref(), at.offset), (Some("k"), 1536));
    assert!(reason.contains("appears twice") && reason.contains("512 and 1536"), "{reason}");
    assert_eq!(crate::FileStore::get(&store, "m.txt").unwrap().0, &b"next"[..]);
}

#[test]
fn a_part_repeated_within_a_sample_is_a_corrupt_sample() {
    let dir = tar_dataset(|b| {
        append_file(b, "k.jpg", b"one");
        append_file(b, "k.txt", b"text");
        append_file(b, "k.jpg", b"two");
        append_file(b, "m.txt", b"next");
    });
    let ds = open(dir.path());
    let err = ds.read(0).unwrap_err();
    let Error::CorruptSample { at, reason } = &err else { panic!("{err:?}") };
    assert_eq!((at.shard.as_str(), at.key.as_deref(), at.offset), ("data.tar", Some("k"), 2048));
    assert!(reason.contains("\"k.jpg\"") && reason.contains("twice"), "{reason}");
    assert!(err.to_string().contains("byte offset 2048"), "{err}");
    // Also when the part filter does not read that part; the next sample is intact.
    let options = OpenOptions { part_filter: PartFilter::names(["txt"]), ..Default::default() };
    assert!(WebDataset::open(dir.path(), &options).unwrap().read(0).is_err());
    assert_eq!(ds.read(1).unwrap().unwrap().key, "m");
}
