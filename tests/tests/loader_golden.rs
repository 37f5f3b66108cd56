//! The loader reproduces the reference's sample order exactly: every recorded `keys-*.txt` and
//! `slices-*.jsonl` of the reference-prepared fixture, and the restore keys of `tests/golden/restore-keys/`.

use std::{fs, path::PathBuf, sync::Arc};

use energon_cook::{Batch, Keyed, Loaded, LoaderBuilder, LoaderWrapper, RestoreKey};
use energon_dist::WorkerConfig;
use energon_reader::{Dataset, OpenOptions};
use energon_tests::{ref_small_dir, ref_small_expected_dir};

/// The loader settings encoded in a recorded file's name, e.g.
/// `keys-jsonl-ws2-r0-nw2-bs5-sb4-s3-msps9.txt`.
#[derive(Debug, Default)]
struct Run {
    jsonl: bool,
    world_size: usize,
    rank: usize,
    num_workers: usize,
    batch_size: usize,
    shuffle_buffer_size: usize,
    seed_offset: i64,
    msps: Option<u64>,
}

fn parse_run(name: &str) -> Run {
    let stem = name.rsplit_once('.').unwrap().0;
    let mut run = Run::default();
    for field in stem.split('-') {
        let (flag, value) =
            field.split_at(field.find(|c: char| c.is_ascii_digit()).unwrap_or(field.len()));
        match flag {
            "keys" | "slices" => {}
            "jsonl" => run.jsonl = true,
            "ws" => run.world_size = value.parse().unwrap(),
            "r" => run.rank = value.parse().unwrap(),
            "nw" => run.num_workers = value.parse().unwrap(),
            "bs" => run.batch_size = value.parse().unwrap(),
            "sb" => run.shuffle_buffer_size = value.parse().unwrap(),
            "s" => run.seed_offset = value.parse().unwrap(),
            "msps" => run.msps = Some(value.parse().unwrap()),
            other => panic!("unknown field {other:?} in {name}"),
        }
    }
    run
}

fn dataset(run: &Run) -> Arc<Dataset> {
    let path = if run.jsonl { ref_small_dir().join("jsonl/data.jsonl") } else { ref_small_dir() };
    Arc::new(Dataset::open(&path, &OpenOptions::default()).unwrap())
}

fn builder(run: &Run) -> LoaderBuilder<String> {
    let cfg = WorkerConfig::new(run.rank, run.world_size, run.num_workers)
        .unwrap()
        .with_seed_offset(run.seed_offset);
    let builder = LoaderBuilder::new(dataset(run), cfg, |raw| Ok(Some(raw.key)))
        .shuffle_buffer_size(run.shuffle_buffer_size)
        .max_samples_per_sequence(run.msps);
    // The reference cooks crude (JSONL) samples in a map stage of their own.
    if run.jsonl { builder.cook(|s| Ok(Some(s))) } else { builder }
}

/// One loader item as `ref_load.py keys --verbose` prints it: one line per sample with the batch
/// index, the position, the key and (on the first line) the item's restore key, including the
/// loader wrapper's `("SimpleSavableDatasetWrapper", global_worker_id, worker_item_index)` (the
/// worker's item index as the loader counts it).
fn verbose_lines(
    run: &Run,
    index: usize,
    worker_item: u64,
    worker: usize,
    restore_key: &RestoreKey,
    keys: &[String],
) -> Vec<String> {
    // The reference's `global_worker_id()` is `rank * num_workers + worker` (0 without workers).
    let global = (run.rank * run.num_workers + worker) as u64;
    let mut full = restore_key.of_loader(LoaderWrapper::Simple, global, worker_item).to_string();
    if run.batch_size > 1 {
        full = format!("[{full}]");
    }
    keys.iter()
        .enumerate()
        .map(|(pos, k)| {
            let rk = if pos == 0 { full.as_str() } else { "None" };
            format!("{index}\t{pos}\t{k}\t{rk}")
        })
        .collect()
}

/// The first `n` keys the loader of `run` yields, and its verbose trace.
fn load(run: &Run, n: usize) -> (Vec<String>, Vec<String>) {
    // (worker, restore key, keys) of each loader item, until `n` keys.
    let mut items: Vec<(usize, u64, RestoreKey, Vec<String>)> = Vec::new();
    let mut n_keys = 0;
    if run.batch_size == 0 {
        let loader = builder(run).build_samples().unwrap();
        for item in loader.take(n) {
            let Loaded { worker, index, value: Keyed { restore_key, value } } = item.unwrap();
            items.push((worker, index, restore_key, vec![value]));
        }
    } else {
        let loader = builder(run).batch_size(Some(run.batch_size)).build_batches().unwrap();
        for item in loader {
            let Loaded { worker, index, value: Keyed { restore_key, value: Batch { samples } } } =
                item.unwrap();
            n_keys += samples.len();
            items.push((
                worker,
                index,
                restore_key,
                samples.into_iter().map(|s| s.value).collect(),
            ));
            if n_keys >= n {
                break;
            }
        }
    }
    let mut keys = Vec::new();
    let mut verbose = Vec::new();
    for (index, (worker, worker_item, restore_key, batch)) in items.into_iter().enumerate() {
        verbose.extend(verbose_lines(run, index, worker_item, worker, &restore_key, &batch));
        keys.extend(batch);
    }
    keys.truncate(n);
    verbose.truncate(n);
    (keys, verbose)
}

fn recorded(prefix: &str, dir: &PathBuf) -> Vec<(String, String)> {
    let mut res: Vec<(String, String)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with(prefix))
        .map(|name| {
            let text = fs::read_to_string(dir.join(&name)).unwrap();
            (name, text)
        })
        .collect();
    res.sort();
    res
}

#[test]
fn every_recorded_key_order_is_reproduced() {
    let files = recorded("keys-", &ref_small_expected_dir());
    assert_eq!(files.len(), 15, "the fixture has 15 recorded orders");
    for (name, text) in files {
        let want: Vec<&str> = text.lines().collect();
        let run = parse_run(&name);
        let (got, _) = load(&run, want.len());
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn every_recorded_slicing_is_reproduced() {
    let files = recorded("slices-", &ref_small_expected_dir());
    assert_eq!(files.len(), 12);
    for (name, text) in files {
        let run = parse_run(&name);
        let dataset = dataset(&run);
        let mut lines = text.lines();
        let shards: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        let names = dataset.shard_names();
        let counts = dataset.shard_counts();
        let got_shards: Vec<serde_json::Value> = names
            .iter()
            .zip(&counts)
            .map(|(name, count)| serde_json::json!([&**name, count]))
            .collect();
        assert_eq!(shards["shards"], serde_json::Value::Array(got_shards), "{name}");
        let slices = builder(&run).worker_slices().unwrap();
        for (worker, line) in lines.enumerate() {
            let want: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(want["worker"], worker, "{name}");
            let want: Vec<u64> = serde_json::from_value(want["offsets"].clone()).unwrap();
            assert_eq!(slices[worker].offsets(), want, "{name} worker {worker}");
        }
        assert_eq!(slices.len(), text.lines().count() - 1, "{name}");
    }
}

#[test]
fn restore_keys_match_the_reference() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/restore-keys");
    let files: Vec<_> =
        recorded("", &dir).into_iter().filter(|(name, _)| name.ends_with(".txt")).collect();
    assert_eq!(files.len(), 6);
    for (name, text) in files {
        let want: Vec<&str> = text.lines().collect();
        let run = parse_run(&name);
        let (keys, verbose) = load(&run, want.len());
        assert_eq!(keys.len(), want.len(), "{name}");
        assert_eq!(verbose, want, "{name}");
    }
}
