//! What the builder keeps whatever it reads: the settings after the blend, the loader options,
//! the configuration a checkpoint records, and starting the loader (fresh or restored).

use std::sync::Arc;

use energon_dist::WorkerConfig;

use crate::{
    builder::BoxStage,
    checkpoint::{
        BATCH_SIZE_KEY, CHECKPOINT_EVERY_KEY, LoaderState, NUM_WORKERS_KEY, PipelineConfig,
        RANK_KEY, WORLD_SIZE_KEY,
    },
    context::{StageEnv, WorkerInfo},
    encoder::TaskEncoder,
    error::{Error, Result},
    loader::{Loader, LoaderConfig, Meta, StartOptions, WorkerLink, WorkerStart},
    pipeline::{self, Settings},
    policy::{ErrorPolicy, FailureStats},
    stage::{Keyed, Stage},
};

/// The settings and options after the blend.
#[derive(Debug, Clone)]
pub(crate) struct Common {
    pub(crate) settings: Settings,
    pub(crate) prefetch_factor: usize,
    pub(crate) error_policy: ErrorPolicy,
    pub(crate) checkpoint_every: u64,
    pub(crate) restore: Option<LoaderState>,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            settings: Settings {
                training: true,
                shuffle_buffer_size: 0,
                batch_size: None,
                drop_last: false,
                packing_buffer_size: None,
                virtual_epoch_length: 0,
                repeat: None,
                limit: None,
            },
            prefetch_factor: 2,
            error_policy: ErrorPolicy::default(),
            checkpoint_every: 1,
            restore: None,
        }
    }
}

impl Common {
    /// What the stages of local worker `worker` share.
    pub(crate) fn env(
        &self,
        worker_config: &WorkerConfig,
        worker: usize,
        stats: &FailureStats,
    ) -> Result<StageEnv> {
        Ok(StageEnv {
            worker: WorkerInfo::new(worker_config, worker)?,
            items: Default::default(),
            stats: stats.clone(),
            policy: self.error_policy.clone(),
        })
    }

    /// The configuration entries of the worker configuration, the settings and the encoder.
    pub(crate) fn config<E: TaskEncoder>(
        &self,
        worker_config: &WorkerConfig,
        encoder: &E,
    ) -> PipelineConfig {
        let s = &self.settings;
        let mut config = PipelineConfig::default();
        config.insert(RANK_KEY, worker_config.rank());
        config.insert(WORLD_SIZE_KEY, worker_config.world_size());
        config.insert(NUM_WORKERS_KEY, worker_config.num_workers());
        config.insert("worker_config.seed_offset", worker_config.seed_offset());
        config.insert("training", s.training);
        let shuffle_buffer =
            if s.training && s.shuffle_buffer_size > 1 { s.shuffle_buffer_size } else { 0 };
        config.insert("shuffle_buffer_size", shuffle_buffer);
        config.insert(BATCH_SIZE_KEY, format!("{:?}", s.batch_size));
        config.insert("drop_last", s.drop_last);
        config.insert("packing_buffer_size", format!("{:?}", s.packing_buffer_size));
        if s.training {
            config.insert("virtual_epoch_length", s.virtual_epoch_length);
        } else {
            config.insert("limit", format!("{:?}", s.limit));
        }
        config.insert("encoder.hooks", encoder.hooks().names().join(","));
        config.insert(CHECKPOINT_EVERY_KEY, self.checkpoint_every);
        for (key, value) in encoder.config() {
            config.insert(format!("encoder.{key}"), value);
        }
        config
    }

    /// The workers' encoded pipelines completed for a loader of samples (steps 7 and 8); fails
    /// when the settings batch.
    pub(crate) fn sample_pipelines<E: TaskEncoder>(
        &self,
        encoder: &E,
        encoded: Vec<(BoxStage<E::Encoded>, StageEnv)>,
    ) -> Result<Vec<BoxStage<E::Encoded>>> {
        if self.settings.batches(encoder) {
            return Err(Error::InvalidSetting {
                setting: "batch_size",
                value: format!("{:?}", self.settings.batch_size),
                reason: "a loader of samples does not batch; use build_batches",
            });
        }
        encoded
            .into_iter()
            .map(|(stage, env)| pipeline::outer_stages(stage, &self.settings, &env))
            .collect()
    }

    /// The workers' encoded pipelines completed for a loader of batches (steps 6 to 8).
    pub(crate) fn batch_pipelines<E: TaskEncoder>(
        &self,
        encoder: &Arc<E>,
        encoded: Vec<(BoxStage<E::Encoded>, StageEnv)>,
    ) -> Result<Vec<BoxStage<E::Output>>> {
        let batch = |(stage, env): (BoxStage<E::Encoded>, StageEnv)| {
            let stage = pipeline::batch_stages(encoder, stage, &self.settings, &env)?;
            pipeline::outer_stages(stage, &self.settings, &env)
        };
        encoded.into_iter().map(batch).collect()
    }

    /// Starts the loader over `pipelines`, where the saved state to restore (if any) says.
    pub(crate) fn start<I: Send + 'static>(
        &self,
        pipelines: Vec<Box<dyn Stage<Item = Keyed<I>>>>,
        worker_config: &WorkerConfig,
        config: PipelineConfig,
        stats: FailureStats,
        batches: bool,
    ) -> Result<Loader<Keyed<I>>> {
        let options = self.start_options(worker_config, config, stats, batches)?;
        let loader_config = LoaderConfig {
            num_workers: worker_config.num_workers(),
            prefetch_factor: self.prefetch_factor,
        };
        Loader::start(pipelines, loader_config, options)
    }

    /// Starts a loader whose workers run elsewhere (`links`, one per local worker), where the
    /// saved state to restore (if any) says.
    pub(crate) fn start_linked<I: Send + 'static>(
        &self,
        links: Vec<Box<dyn WorkerLink<Keyed<I>>>>,
        worker_config: &WorkerConfig,
        config: PipelineConfig,
        stats: FailureStats,
        batches: bool,
    ) -> Result<Loader<Keyed<I>>> {
        if links.len() != worker_config.n_local_workers() {
            return Err(Error::InvalidSetting {
                setting: "num_workers",
                value: links.len().to_string(),
                reason: "needs one worker link per worker (one without workers)",
            });
        }
        let options = self.start_options(worker_config, config, stats, batches)?;
        Loader::linked(links, options)
    }

    /// Local worker `worker`'s start: where the state to restore (if any) says.
    pub(crate) fn worker_start(
        &self,
        worker_config: &WorkerConfig,
        config: PipelineConfig,
        batches: bool,
        worker: usize,
    ) -> Result<WorkerStart> {
        let options =
            self.start_options(worker_config, config, FailureStats::default(), batches)?;
        Ok(options.starts.get(worker).cloned().unwrap_or_default())
    }

    /// Where every worker starts and what the loader's checkpoints record, checked against
    /// the state to restore.
    fn start_options(
        &self,
        worker_config: &WorkerConfig,
        config: PipelineConfig,
        stats: FailureStats,
        batches: bool,
    ) -> Result<StartOptions> {
        let micro_batch_size = if batches { self.settings.batch_size } else { None };
        let mut options = StartOptions {
            checkpoint_every: self.checkpoint_every,
            starts: Vec::new(),
            next_worker: 0,
            meta: Meta {
                worker_config: Some(*worker_config),
                micro_batch_size,
                config: config.clone(),
            },
            stats,
        };
        if let Some(state) = &self.restore {
            let factor = state.check_restore(&config, micro_batch_size)?;
            options.starts = state
                .workers
                .iter()
                .map(|w| WorkerStart {
                    state: w.state.clone(),
                    replay: w.replay.saturating_mul(factor),
                    exhausted: w.exhausted,
                })
                .collect();
            options.next_worker = state.next_worker;
        }
        Ok(options)
    }
}

/// A short, stable identity of a dataset's shards: their number, the samples, and an FNV-1a
/// hash of the names and counts.
pub(crate) fn fingerprint(names: &[Arc<str>], counts: &[u64]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for name in names {
        eat(name.as_bytes());
        eat(&[0]);
    }
    for count in counts {
        eat(&count.to_le_bytes());
    }
    let total: u64 = counts.iter().sum();
    format!("{} shards, {total} samples, fingerprint {hash:016x}", counts.len())
}

/// The setters of the settings and options after the blend.
macro_rules! common_setters {
    () => {
        /// The shuffle buffer size (training only; sizes 0 and 1 mean no buffer).
        pub fn shuffle_buffer_size(mut self, shuffle_buffer_size: usize) -> Self {
            self.common.settings.shuffle_buffer_size = shuffle_buffer_size;
            self
        }

        /// The batch size (`None`: no batching, for `build_samples`, unless the task encoder
        /// batches by group).
        pub fn batch_size(mut self, batch_size: Option<usize>) -> Self {
            self.common.settings.batch_size = batch_size;
            self
        }

        /// Whether the last, shorter batch of a pass is dropped.
        pub fn drop_last(mut self, drop_last: bool) -> Self {
            self.common.settings.drop_last = drop_last;
            self
        }

        /// Packs samples from a buffer of this many (the task encoder's packing hooks).
        pub fn packing_buffer_size(mut self, packing_buffer_size: Option<usize>) -> Self {
            self.common.settings.packing_buffer_size = packing_buffer_size;
            self
        }

        /// Training: ends a pass (an epoch of the loader) after this many items of the rank,
        /// split over its workers (0: never; the reference's `virtual_epoch_length`).
        pub fn virtual_epoch_length(mut self, virtual_epoch_length: u64) -> Self {
            self.common.settings.virtual_epoch_length = virtual_epoch_length;
            self
        }

        /// Validation: at most this many items per pass of the rank, split over its workers.
        pub fn limit(mut self, limit: Option<u64>) -> Self {
            self.common.settings.limit = limit;
            self
        }

        /// Items each worker may prepare ahead (default 2).
        pub fn prefetch_factor(mut self, prefetch_factor: usize) -> Self {
            self.common.prefetch_factor = prefetch_factor;
            self
        }

        /// How hook failures are handled (default: a tolerance of 100 consecutive failures).
        pub fn error_policy(mut self, error_policy: $crate::ErrorPolicy) -> Self {
            self.common.error_policy = error_policy;
            self
        }

        /// How often worker threads report their pipeline's state: every `n` items (default 1,
        /// so saving is exact and restoring replays nothing); 0 never (restoring then replays
        /// every item since the start).
        pub fn checkpoint_every(mut self, n: u64) -> Self {
            self.common.checkpoint_every = n;
            self
        }

        /// Continue from a saved state (the reference's `restore_state_rank`): the loader built
        /// next yields exactly what the saved one would have yielded next. Building fails if
        /// the state was saved by a loader with another dataset or configuration.
        pub fn restore_state(mut self, state: $crate::LoaderState) -> Self {
            self.common.restore = Some(state);
            self
        }
    };
}

pub(crate) use common_setters;
