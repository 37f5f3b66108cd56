//! Worker configuration: ranks, workers per rank, global worker ids and the seeds derived from them.

use std::fmt;

use sha1::{Digest, Sha1};

use crate::{
    error::{Error, Result},
    rng::WorkerRng,
};

/// A 32-bit seed derived the way the reference derives it.
///
/// Seeds come only from [`WorkerConfig::worker_seed`], [`seed_for_global_worker`] and
/// [`restore_seed`], so every random stream of a loader traces back to its worker configuration.
/// `Display` prints the decimal number, as Python's `str(int)` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seed(pub(crate) u32);

impl Seed {
    /// The seed as a number (what the reference passes to `torch.manual_seed`).
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Seed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// How the data of one job is distributed: over `world_size` ranks (data-parallel replicas), each
/// with `num_workers` worker threads or processes.
///
/// `num_workers == 0` means the main process does the loading itself; it then counts as one
/// worker everywhere (slicing, global worker ids and seeds), as in the reference.
///
/// Equality compares every field (the reference's `WorkerConfig.__eq__` compares only rank, world
/// size and number of workers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerConfig {
    rank: usize,
    world_size: usize,
    num_workers: usize,
    seed_offset: i64,
    worker_id_offset: usize,
}

impl WorkerConfig {
    /// A configuration for rank `rank` of `world_size`, with `num_workers` workers on each rank,
    /// seed offset 0 and worker id offset 0.
    ///
    /// Fails unless `world_size >= 1` and `rank < world_size`.
    pub fn new(rank: usize, world_size: usize, num_workers: usize) -> Result<Self> {
        if world_size == 0 {
            return Err(Error::ZeroWorldSize);
        }
        if rank >= world_size {
            return Err(Error::RankOutOfRange { rank, world_size });
        }
        if num_workers.max(1).checked_mul(world_size).is_none() {
            return Err(Error::TooManyWorkers { num_workers, world_size });
        }
        Ok(WorkerConfig { rank, world_size, num_workers, seed_offset: 0, worker_id_offset: 0 })
    }

    /// The same configuration with another seed offset (the reference's `seed_offset`, which may
    /// be negative; it changes every random stream but not the slicing).
    pub fn with_seed_offset(self, seed_offset: i64) -> Self {
        WorkerConfig { seed_offset, ..self }
    }

    /// The same configuration with another worker id offset: after a restore, physical worker `p`
    /// plays logical worker `(p + worker_id_offset) % max(1, num_workers)`, so that physical
    /// worker 0 continues with the worker whose turn was next.
    ///
    /// Fails unless `worker_id_offset < max(1, num_workers)`.
    pub fn with_worker_id_offset(self, worker_id_offset: usize) -> Result<Self> {
        let n_local_workers = self.n_local_workers();
        if worker_id_offset >= n_local_workers {
            return Err(Error::WorkerIdOffsetOutOfRange { worker_id_offset, n_local_workers });
        }
        Ok(WorkerConfig { worker_id_offset, ..self })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The number of workers per rank as configured (0: loading in the main process).
    pub fn num_workers(&self) -> usize {
        self.num_workers
    }

    /// The seed offset.
    pub fn seed_offset(&self) -> i64 {
        self.seed_offset
    }

    /// The worker id offset (see [`WorkerConfig::with_worker_id_offset`]).
    pub fn worker_id_offset(&self) -> usize {
        self.worker_id_offset
    }

    /// The number of workers that load data on each rank: `max(1, num_workers)`.
    pub fn n_local_workers(&self) -> usize {
        self.num_workers.max(1)
    }

    /// The number of workers over all ranks: `max(1, num_workers) * world_size`, the number of
    /// parts every dataset is split into.
    pub fn n_global_workers(&self) -> usize {
        // Checked in `new`.
        self.n_local_workers() * self.world_size
    }

    /// The global id of a local worker of this rank: `rank * max(1, num_workers) + local`.
    ///
    /// With `num_workers == 0` this is the rank, the id the reference uses for seeds and slicing.
    /// (Its `global_worker_id()` method returns `rank * 0 + 0` in that case; a loader that writes
    /// the reference's restore keys has to account for that itself.)
    pub fn global_worker_id(&self, local_worker_id: usize) -> Result<usize> {
        self.check_local(local_worker_id)?;
        Ok(self.rank * self.n_local_workers() + local_worker_id)
    }

    /// The logical (local) worker id that physical worker `physical_worker_id` plays:
    /// `(physical + worker_id_offset) % max(1, num_workers)`.
    pub fn local_worker_id(&self, physical_worker_id: usize) -> Result<usize> {
        self.check_local(physical_worker_id)?;
        Ok((physical_worker_id + self.worker_id_offset) % self.n_local_workers())
    }

    /// The seed of a local worker of this rank: the low 32 bits of the big-endian SHA-1 of
    /// `"{global_worker_id},{seed_offset}"`.
    ///
    /// Every random stream of that worker (each leaf's slice order, each blend, the shuffle
    /// buffer) starts from this seed.
    pub fn worker_seed(&self, local_worker_id: usize) -> Result<Seed> {
        Ok(seed_for_global_worker(self.global_worker_id(local_worker_id)?, self.seed_offset))
    }

    /// A fresh random stream seeded with [`WorkerConfig::worker_seed`] (seeded lazily, on its
    /// first draw, as in the reference).
    pub fn worker_rng(&self, local_worker_id: usize) -> Result<WorkerRng> {
        Ok(WorkerRng::new(self.worker_seed(local_worker_id)?))
    }

    fn check_local(&self, worker_id: usize) -> Result<()> {
        let n_local_workers = self.n_local_workers();
        if worker_id >= n_local_workers {
            return Err(Error::WorkerOutOfRange { worker_id, n_local_workers });
        }
        Ok(())
    }
}

/// The worker seed of a global worker id (what [`WorkerConfig::worker_seed`] computes for a local
/// worker): the low 32 bits of the big-endian SHA-1 of `"{global_worker_id},{seed_offset}"`.
///
/// Use it where only the global id is known, e.g. when regenerating a sample from a restore key.
pub fn seed_for_global_worker(global_worker_id: usize, seed_offset: i64) -> Seed {
    // COMPAT(energon 7.4.1): worker.py:WorkerConfig.worker_seed.
    let digest = Sha1::digest(format!("{global_worker_id},{seed_offset}").as_bytes());
    // The low 32 bits of the big-endian number are its last four bytes.
    let mut low = [0u8; 4];
    low.copy_from_slice(&digest[16..20]);
    Seed(u32::from_be_bytes(low))
}

/// The seed the reference gives the global random generators of a `restore_seeds` stateless
/// function for one sample: the first four bytes, big-endian, of the SHA-1 of
/// `"{worker_seed}|{sample_index}"`.
///
/// It depends only on the worker and the sample, so a sample regenerated from its restore key sees
/// the same randomness as when it was first produced.
pub fn restore_seed(worker_seed: Seed, sample_index: u64) -> Seed {
    // COMPAT(energon 7.4.1): rng.py:SystemRng.get_seed_from_args(worker_seed, sample_index).
    let digest = Sha1::digest(format!("{worker_seed}|{sample_index}").as_bytes());
    let mut high = [0u8; 4];
    high.copy_from_slice(&digest[..4]);
    Seed(u32::from_be_bytes(high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert_eq!(WorkerConfig::new(0, 0, 2), Err(Error::ZeroWorldSize));
        assert_eq!(
            WorkerConfig::new(2, 2, 2),
            Err(Error::RankOutOfRange { rank: 2, world_size: 2 })
        );
        assert_eq!(
            WorkerConfig::new(0, usize::MAX, 2),
            Err(Error::TooManyWorkers { num_workers: 2, world_size: usize::MAX })
        );
        assert!(WorkerConfig::new(0, usize::MAX, 0).is_ok());
        let cfg = WorkerConfig::new(1, 2, 3).unwrap();
        assert_eq!(
            cfg.with_worker_id_offset(3),
            Err(Error::WorkerIdOffsetOutOfRange { worker_id_offset: 3, n_local_workers: 3 })
        );
        assert_eq!(
            WorkerConfig::new(0, 1, 0).unwrap().with_worker_id_offset(1),
            Err(Error::WorkerIdOffsetOutOfRange { worker_id_offset: 1, n_local_workers: 1 })
        );
        assert_eq!(
            cfg.global_worker_id(3),
            Err(Error::WorkerOutOfRange { worker_id: 3, n_local_workers: 3 })
        );
        assert_eq!(
            cfg.worker_seed(5),
            Err(Error::WorkerOutOfRange { worker_id: 5, n_local_workers: 3 })
        );
    }

    #[test]
    fn global_ids() {
        let cfg = WorkerConfig::new(2, 4, 3).unwrap();
        assert_eq!(cfg.n_local_workers(), 3);
        assert_eq!(cfg.n_global_workers(), 12);
        assert_eq!(cfg.global_worker_id(0), Ok(6));
        assert_eq!(cfg.global_worker_id(2), Ok(8));
        let no_workers = WorkerConfig::new(3, 5, 0).unwrap();
        assert_eq!(no_workers.n_global_workers(), 5);
        assert_eq!(no_workers.global_worker_id(0), Ok(3));
    }

    #[test]
    fn worker_id_offset_rotates_left() {
        let cfg = WorkerConfig::new(0, 1, 4).unwrap().with_worker_id_offset(1).unwrap();
        let logical: Vec<_> = (0..4).map(|p| cfg.local_worker_id(p).unwrap()).collect();
        assert_eq!(logical, [1, 2, 3, 0]);
        assert!(cfg.local_worker_id(4).is_err());
    }

    #[test]
    fn worker_seeds() {
        // Low 32 bits of SHA-1("0,0") = e499ce7a21cd46c8d0365556b91594af1048e045.
        assert_eq!(seed_for_global_worker(0, 0).get(), 0x1048_e045);
        assert_eq!(seed_for_global_worker(0, 0).get(), 273_211_461);
        assert_eq!(seed_for_global_worker(1, 0).get(), 3_250_511_459);
        assert_eq!(seed_for_global_worker(3, 42).get(), 3_330_401_524);
        assert_eq!(seed_for_global_worker(0, -7).get(), 3_145_487_579);
        assert_eq!(seed_for_global_worker(123_456, i64::MAX).get(), 1_485_747_978);
        // Rank 1 of 2 with 2 workers: local worker 1 is global worker 3.
        let cfg = WorkerConfig::new(1, 2, 2).unwrap().with_seed_offset(42);
        assert_eq!(cfg.worker_seed(1).unwrap().get(), 3_330_401_524);
        // Without workers the rank is the global id.
        let cfg = WorkerConfig::new(1, 2, 0).unwrap();
        assert_eq!(cfg.worker_seed(0).unwrap().get(), 3_250_511_459);
        assert_eq!(cfg.worker_seed(0).unwrap().to_string(), "3250511459");
    }

    #[test]
    fn restore_seeds() {
        let seed = seed_for_global_worker(0, 0);
        assert_eq!(restore_seed(seed, 0).get(), 1_296_091_978);
        assert_eq!(restore_seed(seed, 1).get(), 1_282_064_936);
        assert_eq!(restore_seed(seed_for_global_worker(3, 42), 123_456_789).get(), 320_971_808);
    }
}
