//! The leaf stage: a worker's slice order (energon-reader's [`LeafIter`]) joined with a sample
//! reader.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};

use energon_reader::leaf::LeafIter;

use crate::{
    error::{Error, Result},
    restore_key::{JOINED, KeyPart, RestoreKey},
    stage::{Keyed, Stage, bad_key, split_key},
    state::{StageState, mismatch},
};

/// Reads the samples of one worker in the leaf's order (the reference's
/// `WebdatasetSampleLoaderDataset`): each index from the [`LeafIter`] goes to `read`; a sample that
/// `read` reports as excluded (`Ok(None)`) is skipped, but still counts as read, as in the
/// reference. Items carry the key `("Webdataset", index)`.
///
/// With a prefetch hint ([`LeafSource::with_prefetch`]), the samples where reads go next are
/// announced before they are read: every open slice's next sample when an epoch starts, and the
/// first samples of the next slices to open (as many as are open at once, at least four), each
/// once (a dataset in an object store fetches them in the background, so a new slice does not
/// wait for storage).
pub struct LeafSource<R> {
    leaf: LeafIter,
    read: R,
    prefetch: Option<Hint>,
    /// The starts of the next slices last announced.
    announced: Vec<u64>,
    /// Whether the samples are rows of a join (see [`LeafSource::joined`]).
    joined: bool,
}

impl<R> LeafSource<R> {
    /// A leaf stage over `leaf` reading with `read`.
    pub fn new(leaf: LeafIter, read: R) -> Self {
        LeafSource { leaf, read, prefetch: None, announced: Vec::new(), joined: false }
    }

    /// Marks the samples as rows of a join: their keys are [`RestoreKey::joined_leaf`].
    #[must_use]
    pub fn joined(mut self) -> Self {
        self.joined = true;
        self
    }

    fn key(&self, index: u64) -> RestoreKey {
        if self.joined { RestoreKey::joined_leaf(index) } else { RestoreKey::leaf(index) }
    }

    /// Announces the samples where reads go next to `prefetch`, which runs on a small pool of
    /// threads shared by the process (so it may block on storage without stalling this worker).
    #[must_use]
    pub fn with_prefetch(mut self, prefetch: impl Fn(u64) + Send + Sync + 'static) -> Self {
        self.prefetch = Some(Arc::new(prefetch));
        self
    }

    fn announce(&mut self) {
        let Some(prefetch) = &self.prefetch else { return };
        // The first sample of an epoch: every open slice is new.
        let epoch_start = self.leaf.epoch_sample_count() == 1;
        if epoch_start {
            self.announced.clear();
        }
        // Open slices end at about the same time (they are read at the same rate), so as many
        // slices as are open at once may open together.
        let ahead = SLICES_AHEAD.max(self.leaf.config().n_slots());
        let next = self.leaf.upcoming(false, ahead);
        if epoch_start {
            for i in self.leaf.upcoming(true, 0) {
                submit(prefetch, i);
            }
        }
        for &i in &next {
            if !self.announced.contains(&i) {
                submit(prefetch, i);
            }
        }
        self.announced = next;
    }
}

impl<R> std::fmt::Debug for LeafSource<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafSource").field("leaf", &self.leaf).finish_non_exhaustive()
    }
}

impl<T, R> Stage for LeafSource<R>
where
    R: FnMut(u64) -> Result<Option<T>> + Send,
{
    type Item = Keyed<T>;

    fn next(&mut self) -> Result<Option<Keyed<T>>> {
        while let Some(index) = self.leaf.next_index()? {
            self.announce();
            if let Some(value) = (self.read)(index)? {
                return Ok(Some(Keyed { restore_key: self.key(index), value }));
            }
        }
        Ok(None)
    }

    fn len_worker(&self) -> u64 {
        self.leaf.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Leaf { leaf: self.leaf.state() })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Leaf { leaf } = state else { return Err(mismatch("leaf", state)) };
        let slices = self.leaf.slices().clone();
        let config = *self.leaf.config();
        self.leaf =
            LeafIter::from_state(slices, config, leaf.clone()).ok_or_else(|| Error::BadState {
                reason: "the saved slice iteration does not fit this worker's slices".to_owned(),
            })?;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<T>> {
        // (A joined sample's key is marked; keys saved before it was are taken too.)
        let key = match key {
            [KeyPart::Name(name), rest @ ..] if self.joined && name == JOINED => rest,
            key => key,
        };
        let Some((index, [])) = split_key(energon_reader::RESTORE_KEY_KIND, key) else {
            return Err(bad_key("leaf", key));
        };
        match (self.read)(index)? {
            Some(value) => Ok(Keyed { restore_key: self.key(index), value }),
            None => Err(Error::BadState {
                reason: format!("sample {index} is excluded and cannot have been buffered"),
            }),
        }
    }
}

/// How many of the slices to open next are announced to the prefetch hint, at least (as many as
/// are open at once when that is more).
const SLICES_AHEAD: usize = 4;

/// A prefetch hint of a leaf.
type Hint = Arc<dyn Fn(u64) + Send + Sync>;

/// A hint to run, with its sample index.
type Job = (Hint, u64);

/// Threads running prefetch hints.
const HINT_THREADS: usize = 8;

/// Runs `hint(index)` on the process's prefetch threads (started on first use).
fn submit(hint: &Hint, index: u64) {
    static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..HINT_THREADS {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new().name(format!("energon-prefetch-{i}")).spawn(
                move || {
                    loop {
                        let job = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        let Ok((hint, index)) = job else { return };
                        hint(index);
                    }
                },
            );
            if spawned.is_err() {
                return None;
            }
        }
        Some(tx)
    });
    // Without threads a hint is dropped: it only saves time.
    if let Some(tx) = queue {
        let _ = tx.send((hint.clone(), index));
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use energon_dist::{WorkerConfig, shard_workers};
    use energon_reader::leaf::LeafConfig;

    use super::*;

    /// The first read announces the next sample of every open slice, and the starts of as many
    /// slices to open next as are open at once (they may all open together).
    #[test]
    fn hints_cover_as_many_next_slices_as_are_open() {
        let cfg = WorkerConfig::new(0, 1, 0).unwrap();
        let slices = shard_workers(&[10; 40], None, &cfg, 0, None).unwrap().remove(0);
        let leaf = LeafIter::new(slices, LeafConfig::TRAIN, cfg.worker_rng(0).unwrap()).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut source = LeafSource::new(leaf, |i| Ok(Some(i)))
            .with_prefetch(move |i| sink.lock().unwrap().push(i));
        source.next().unwrap().unwrap();
        let mut want = source.leaf.upcoming(true, 16);
        want.sort_unstable();
        assert_eq!(want.len(), 32, "16 open slices and 16 of the 24 to open");
        let start = Instant::now();
        loop {
            let mut got = seen.lock().unwrap().clone();
            got.sort_unstable();
            got.dedup();
            if want.iter().all(|i| got.binary_search(i).is_ok()) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "announced {got:?}, want {want:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
