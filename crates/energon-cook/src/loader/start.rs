//! Starting a loader over pipelines its caller assembled (datasets built separately and
//! combined worker by worker, [`combine_pipelines`](crate::combine_pipelines)): where each
//! worker starts, and what the loader's checkpoints record, checked against a state to restore.

use energon_dist::WorkerConfig;

use super::{Loader, LoaderConfig, Meta, StartOptions, WorkerLink, WorkerStart};
use crate::{
    checkpoint::{LoaderState, PipelineConfig},
    error::{Error, Result},
    policy::FailureStats,
    stage::Stage,
};

/// How a loader over the caller's pipelines of `worker_config`'s local workers starts: fresh,
/// or where `restore` says. Its checkpoints record `config` (what identifies the pipelines),
/// which a state to restore must record too; states are saved after every item.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoaderStart {
    /// The rank and its workers (saved states and restore keys name them).
    pub worker_config: WorkerConfig,
    /// What identifies the pipelines in a checkpoint.
    pub config: PipelineConfig,
    /// Items each worker thread prepares ahead.
    pub prefetch_factor: usize,
    /// The state to continue from.
    pub restore: Option<LoaderState>,
}

impl LoaderStart {
    /// Fresh pipelines of `worker_config`'s workers, with an empty configuration and the
    /// default prefetch.
    pub fn new(worker_config: WorkerConfig) -> Self {
        LoaderStart {
            worker_config,
            config: PipelineConfig::default(),
            prefetch_factor: LoaderConfig::default().prefetch_factor,
            restore: None,
        }
    }

    /// The loader over `pipelines`, one per local worker (one without workers, run in the
    /// caller's thread), built as those of the loader that saved the state to restore.
    pub fn start<I: Send + 'static>(
        &self,
        pipelines: Vec<Box<dyn Stage<Item = I>>>,
    ) -> Result<Loader<I>> {
        let config = LoaderConfig {
            num_workers: self.worker_config.num_workers(),
            prefetch_factor: self.prefetch_factor,
        };
        Loader::start(pipelines, config, self.options()?)
    }

    /// The loader over links to pipelines that run elsewhere, one per local worker: each
    /// link's worker serves its pipeline from [`LoaderStart::worker_start`] (with
    /// [`serve_worker`](crate::serve_worker) and a checkpoint every item), or is an
    /// [`InlineWorker`](crate::InlineWorker).
    pub fn start_linked<I: Send + 'static>(
        &self,
        links: Vec<Box<dyn WorkerLink<I>>>,
    ) -> Result<Loader<I>> {
        Loader::linked(links, self.options()?)
    }

    /// Where local worker `worker`'s pipeline starts.
    pub fn worker_start(&self, worker: usize) -> Result<WorkerStart> {
        Ok(self.options()?.starts.get(worker).cloned().unwrap_or_default())
    }

    fn options(&self) -> Result<StartOptions> {
        let meta = Meta {
            worker_config: Some(self.worker_config),
            micro_batch_size: None,
            config: self.config.clone(),
        };
        let Some(state) = &self.restore else {
            return Ok(StartOptions { checkpoint_every: 1, meta, ..StartOptions::default() });
        };
        if state.reshaped.is_some() {
            return Err(Error::InvalidSetting {
                setting: "restore",
                value: "a state reshaped for other ranks or workers".to_owned(),
                reason: "datasets combined after they were built restore only on the ranks and \
                         workers that saved them",
            });
        }
        if (state.rank, state.world_size, state.num_workers)
            != (
                self.worker_config.rank(),
                self.worker_config.world_size(),
                self.worker_config.num_workers(),
            )
        {
            return Err(Error::BadState {
                reason: format!(
                    "saved by rank {} of {} with {} workers, restored into rank {} of {} with {}",
                    state.rank,
                    state.world_size,
                    state.num_workers,
                    self.worker_config.rank(),
                    self.worker_config.world_size(),
                    self.worker_config.num_workers()
                ),
            });
        }
        state.check_restore(&self.config, None)?;
        Ok(StartOptions { meta, stats: FailureStats::default(), ..StartOptions::of_state(state) })
    }
}
