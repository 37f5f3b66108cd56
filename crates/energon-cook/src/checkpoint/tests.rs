//! Tests of the checkpoint format: round trips, damaged and foreign files, restore checks and
//! redistribution.

use energon_dist::{WorkerConfig, shard_workers};
use energon_reader::leaf::{LeafConfig, LeafIter};
use proptest::prelude::*;

use super::*;
use crate::{RestoreKey, state::StageState};

/// A leaf state after `n` samples of global worker `worker` of 4.
fn leaf_state(worker: usize, n: usize) -> StageState {
    let cfg = WorkerConfig::new(worker / 2, 2, 2).unwrap();
    let slices = shard_workers(&[50, 50, 50, 50], None, &cfg, 0, None).unwrap().remove(worker % 2);
    let mut leaf =
        LeafIter::new(slices, LeafConfig::TRAIN, cfg.worker_rng(worker % 2).unwrap()).unwrap();
    for _ in 0..n {
        leaf.next_index().unwrap();
    }
    StageState::ShuffleBuffer {
        rng: cfg.worker_rng(0).unwrap().state(),
        restore_keys: vec![RestoreKey::leaf(3), RestoreKey::leaf(7)],
        draining: false,
        inner: Box::new(StageState::Leaf { leaf: leaf.state() }),
    }
}

fn config(rank: usize, world_size: usize, num_workers: usize) -> PipelineConfig {
    let mut config = PipelineConfig::default();
    config.insert(RANK_KEY, rank);
    config.insert(WORLD_SIZE_KEY, world_size);
    config.insert(NUM_WORKERS_KEY, num_workers);
    config.insert(BATCH_SIZE_KEY, "Some(4)");
    config.insert("dataset.shards", "4 shards, 200 samples");
    config.insert("_dataset.path", "/somewhere");
    config
}

fn rank_state(rank: usize, world_size: usize, num_workers: usize) -> LoaderState {
    LoaderState {
        rank,
        world_size,
        num_workers,
        next_worker: 0,
        micro_batch_size: Some(4),
        workers: (0..num_workers.max(1))
            .map(|w| {
                let global = rank * num_workers.max(1) + w;
                WorkerState {
                    global_worker_id: global,
                    state: Some(leaf_state(global % 4, 3 + global)),
                    replay: global as u64,
                    exhausted: false,
                }
            })
            .collect(),
        config: config(rank, world_size, num_workers),
        reshaped: None,
    }
}

fn checkpoint() -> Checkpoint {
    Checkpoint::of_rank(rank_state(1, 2, 2))
}

fn path() -> &'static Path {
    Path::new("state.ckpt")
}

#[test]
fn both_encodings_round_trip() {
    let ckpt = checkpoint();
    for encoding in [Encoding::Binary, Encoding::Json] {
        let bytes = ckpt.to_bytes(encoding).unwrap();
        assert_eq!(Checkpoint::from_bytes(&bytes, path()).unwrap(), ckpt, "{encoding:?}");
    }
    let json = String::from_utf8(ckpt.to_bytes(Encoding::Json).unwrap()).unwrap();
    assert!(
        json.starts_with("{\n  \"format\": \"energon-rs-checkpoint\",\n  \"version\": 3,"),
        "{json}"
    );
    // Keys read as the reference prints its tuples' elements.
    assert!(json.contains("\"Webdataset\",\n"), "{json}");
    let binary = ckpt.to_bytes(Encoding::Binary).unwrap();
    assert!(binary.len() * 3 < json.len(), "{} vs {}", binary.len(), json.len());
}

#[test]
fn files_are_written_atomically_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint();
    for name in ["a.ckpt", "a.json"] {
        let path = dir.path().join(name);
        fs::write(&path, "old content").unwrap();
        ckpt.write(&path).unwrap();
        assert_eq!(Checkpoint::read(&path).unwrap(), ckpt);
    }
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "no temporary file is left: {names:?}");
    let missing = dir.path().join("no/such/folder/a.ckpt");
    let err = ckpt.write(&missing).unwrap_err();
    assert!(matches!(err, Error::CheckpointIo { action: "write", .. }), "{err}");
    let err = Checkpoint::read(&dir.path().join("none.ckpt")).unwrap_err();
    assert!(matches!(err, Error::CheckpointIo { action: "read", .. }), "{err}");
}

fn corrupt_reason(bytes: &[u8]) -> (u64, String) {
    match Checkpoint::from_bytes(bytes, path()) {
        Err(Error::CorruptCheckpoint { offset, reason, .. }) => (offset, reason),
        other => panic!("expected a corrupt checkpoint, got {other:?}"),
    }
}

#[test]
fn truncated_and_damaged_files_are_corrupt() {
    let bytes = checkpoint().to_bytes(Encoding::Binary).unwrap();
    let (offset, reason) = corrupt_reason(&bytes[..bytes.len() - 10]);
    assert!(reason.starts_with("truncated"), "{reason}");
    assert_eq!(offset, bytes.len() as u64 - 10);
    let (_, reason) = corrupt_reason(&bytes[..5]);
    assert!(reason.contains("header"), "{reason}");
    let mut flipped = bytes.clone();
    let last = flipped.len() - 100;
    flipped[last] ^= 0x10;
    let (_, reason) = corrupt_reason(&flipped);
    assert!(reason.contains("checksum"), "{reason}");
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"junk");
    let (offset, reason) = corrupt_reason(&longer);
    assert!(reason.contains("unexpected bytes"), "{reason}");
    assert_eq!(offset, bytes.len() as u64);
    // A state saved with torch.save: the entry to take is named.
    let (_, reason) = corrupt_reason(b"PK\x03\x04 a zip file");
    assert!(reason.contains("torch.save") && reason.contains("\"checkpoint\" entry"), "{reason}");
    let (_, reason) = corrupt_reason(b"");
    assert!(reason.contains("not an energon-rs checkpoint"), "{reason}");

    let json = checkpoint().to_bytes(Encoding::Json).unwrap();
    let cut = &json[..json.len() / 2];
    let (offset, reason) = corrupt_reason(cut);
    assert!(reason.contains("invalid JSON"), "{reason}");
    assert!(offset > 0 && offset <= cut.len() as u64, "{offset}");
    let (_, reason) = corrupt_reason(br#"{"format": "something else", "version": 2}"#);
    assert!(reason.contains("not an energon-rs checkpoint"), "{reason}");
}

#[test]
fn newer_versions_are_incompatible_not_corrupt() {
    let json = br#"{"format": "energon-rs-checkpoint", "version": 4, "ranks": "a new layout"}"#;
    let err = Checkpoint::from_bytes(json, path()).unwrap_err();
    assert!(matches!(err, Error::IncompatibleCheckpoint { found: 4, .. }), "{err}");
    assert!(err.to_string().contains("use a newer energon-rs"), "{err}");
    // Version 1 kept the combining stages of a metadataset in a layout of their own; version 2
    // had no remainders of other workers' passes.
    for version in [1, 2] {
        let old =
            format!(r#"{{"format": "energon-rs-checkpoint", "version": {version}, "ranks": []}}"#);
        let err = Checkpoint::from_bytes(old.as_bytes(), path()).unwrap_err();
        assert!(
            matches!(err, Error::IncompatibleCheckpoint { found, .. } if found == version),
            "{err}"
        );
        assert!(err.to_string().contains("older energon-rs"), "{err}");
    }
    let header = Header {
        format: CHECKPOINT_FORMAT.to_owned(),
        version: 7,
        body_len: 3,
        body_crc32: crc32(b"new"),
    };
    let mut bytes = postcard::to_stdvec(&header).unwrap();
    bytes.extend_from_slice(b"new");
    let err = Checkpoint::from_bytes(&bytes, path()).unwrap_err();
    assert!(matches!(err, Error::IncompatibleCheckpoint { found: 7, .. }), "{err}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Whatever is cut off (beyond a JSON file's final newline) or flipped, reading a binary
    /// file fails with an error, never a panic and never a different checkpoint. (The JSON form
    /// is for humans and may be edited: a flipped digit is a different, valid checkpoint; it
    /// only must not panic.)
    #[test]
    fn damage_is_always_detected(cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>(), bit in 0u8..8, json in any::<bool>()) {
        let ckpt = checkpoint();
        let bytes = ckpt.to_bytes(if json { Encoding::Json } else { Encoding::Binary }).unwrap();
        let cut = cut.index(bytes.len());
        let read = Checkpoint::from_bytes(&bytes[..cut], path());
        if json && bytes[cut..].iter().all(u8::is_ascii_whitespace) {
            // Only the final newline is gone: the same checkpoint.
            prop_assert_eq!(read.ok(), Some(ckpt));
        } else {
            prop_assert!(read.is_err());
        }
        let mut flipped = bytes.clone();
        flipped[flip.index(bytes.len())] ^= 1 << bit;
        let read = Checkpoint::from_bytes(&flipped, path());
        prop_assert!(json || read.is_err(), "an altered binary file was read");
    }
}

#[test]
fn a_restore_checks_the_configuration_and_the_micro_batch() {
    let state = rank_state(1, 2, 2);
    let mine = config(1, 2, 2);
    assert_eq!(state.check_restore(&mine, Some(4)).unwrap(), 1);
    assert_eq!(state.check_restore(&mine, Some(2)).unwrap(), 2);
    assert_eq!(state.check_restore(&mine, Some(1)).unwrap(), 4);
    for bad in [Some(3), Some(8), None] {
        let err = state.check_restore(&mine, bad).unwrap_err();
        assert!(matches!(err, Error::ConfigMismatch { .. }), "{bad:?}: {err}");
    }
    let mut other = mine.clone();
    other.insert("dataset.shards", "5 shards, 250 samples");
    other.insert(NUM_WORKERS_KEY, 4);
    other.insert("_dataset.path", "/elsewhere");
    let err = state.check_restore(&other, Some(4)).unwrap_err();
    let Error::ConfigMismatch { differences } = &err else { panic!("{err}") };
    let keys: Vec<&str> = differences.iter().map(|d| d.key.as_str()).collect();
    assert_eq!(keys, ["dataset.shards", NUM_WORKERS_KEY]);
    assert_eq!(
        err.to_string(),
        "the checkpoint was saved by a different loader: dataset.shards is 4 shards, 200 samples \
         in the checkpoint but 5 shards, 250 samples in this loader; worker_config.num_workers is \
         2 in the checkpoint but 4 in this loader"
    );
    let mut broken = state;
    broken.workers.pop();
    assert!(matches!(broken.check_restore(&mine, Some(4)), Err(Error::BadState { .. })));
}

#[test]
fn a_replay_longer_than_the_saving_interval_is_refused() {
    let mut state = rank_state(0, 1, 2);
    state.config.insert(CHECKPOINT_EVERY_KEY, 4);
    let mine = state.config.clone();
    state.workers[1].replay = 3;
    assert_eq!(state.check_restore(&mine, Some(4)).unwrap(), 1);
    // A hand-edited count would replay for ever.
    state.workers[1].replay = 1_000_000_000_000_000;
    let err = state.check_restore(&mine, Some(4)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the saved state does not fit this loader: worker 1 of rank 0 is to replay \
         1000000000000000 items after its saved state, but the loader saved its state every 4 \
         items"
    );
    // Without a saved stage state (stages that cannot save), every item since the start is
    // replayed.
    state.workers[1].state = None;
    assert_eq!(state.check_restore(&mine, Some(4)).unwrap(), 1);
}

#[test]
fn redistribution_keeps_every_worker_and_its_state() {
    let global = Checkpoint { ranks: vec![rank_state(1, 2, 2), rank_state(0, 2, 2)] };
    for (new_world, per_rank) in [(4, 1), (1, 4), (2, 2)] {
        let out = global.redistribute(new_world).unwrap();
        assert_eq!(out.ranks.len(), new_world);
        let mut all = Vec::new();
        for (rank, state) in out.ranks.iter().enumerate() {
            assert_eq!(
                (state.rank, state.world_size, state.num_workers),
                (rank, new_world, per_rank)
            );
            assert_eq!(state.config.get(RANK_KEY), Some(rank.to_string().as_str()));
            assert_eq!(state.config.get(NUM_WORKERS_KEY), Some(per_rank.to_string().as_str()));
            // Each state can be restored by a loader of the new layout.
            state
                .check_restore(
                    &{
                        let mut c = config(rank, new_world, per_rank);
                        c.insert("_dataset.path", "/moved");
                        c
                    },
                    Some(2),
                )
                .unwrap();
            all.extend(state.workers.iter().cloned());
        }
        let want: Vec<WorkerState> = [rank_state(0, 2, 2), rank_state(1, 2, 2)]
            .into_iter()
            .flat_map(|s| s.workers)
            .collect();
        assert_eq!(all, want);
    }
}

#[test]
fn redistribution_refuses_what_it_cannot_do() {
    let global = Checkpoint { ranks: vec![rank_state(0, 2, 2), rank_state(1, 2, 2)] };
    let bad = |c: &Checkpoint, n: usize| match c.redistribute(n) {
        Err(Error::BadState { reason }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(bad(&global, 3).contains("cannot be spread evenly"));
    assert!(bad(&global, 0).contains("cannot be spread evenly"));
    assert!(bad(&Checkpoint::of_rank(rank_state(0, 2, 2)), 4).contains("ranks 0..2"));
    let mut turned = global.clone();
    turned.ranks[1].next_worker = 1;
    assert!(bad(&turned, 4).contains("worker 1 next"));
    let mut mixed = global.clone();
    mixed.ranks[1].micro_batch_size = Some(8);
    assert_eq!(
        bad(&mixed, 4),
        "rank 1 was saved with micro batch size 8 but rank 0 with 4; redistribution needs one \
         micro batch size on every rank"
    );
    mixed.ranks[1].micro_batch_size = None;
    assert!(bad(&mixed, 4).contains("micro batch size none but rank 0 with 4"));
    let mut other = global;
    other.ranks[1].config.insert("dataset.shards", "another dataset");
    assert!(matches!(other.redistribute(4), Err(Error::ConfigMismatch { .. })));
}
