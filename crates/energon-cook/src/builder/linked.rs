//! Loaders whose workers run elsewhere: the builder's side of worker processes.
//!
//! A loader of process workers is two halves built from the same settings. In each worker
//! process, [`LoaderBuilder::batch_worker`] (or `sample_worker`) gives that worker's pipeline and
//! where it starts (a restored state's position); it is served with [`WorkerPipeline::serve`].
//! In the main process, [`LoaderBuilder::build_batches_linked`] (or `build_samples_linked`) builds
//! the loader over one [`WorkerLink`] per worker, which receives what the worker serves. The
//! round robin, restore keys and saved states are the loader's, as with worker threads, so keys
//! and states do not depend on where the pipelines run.

use crate::{
    builder::{BoxStage, LoaderBuilder},
    encoder::TaskEncoder,
    error::{Error, Result},
    loader::{InlineWorker, Loader, WorkerLink, WorkerMessage, WorkerStart, serve_worker},
    policy::FailureStats,
    stage::Keyed,
};

/// One worker's pipeline, where it starts, and how often it reports its state.
pub struct WorkerPipeline<I> {
    pipeline: BoxStage<I>,
    start: WorkerStart,
    checkpoint_every: u64,
}

impl<I> std::fmt::Debug for WorkerPipeline<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPipeline")
            .field("start", &self.start)
            .field("checkpoint_every", &self.checkpoint_every)
            .finish_non_exhaustive()
    }
}

impl<I> WorkerPipeline<I> {
    /// Where the pipeline starts.
    pub fn start(&self) -> &WorkerStart {
        &self.start
    }

    /// Runs the pipeline, handing every message to `send` until the pipeline fails or `send`
    /// returns `false` (see [`serve_worker`]).
    pub fn serve(self, send: impl FnMut(WorkerMessage<Keyed<I>>) -> bool) {
        serve_worker(self.pipeline, &self.start, self.checkpoint_every, send);
    }

    /// The pipeline as a worker pulled in the loader's own thread.
    pub fn into_inline(self) -> InlineWorker<Keyed<I>> {
        InlineWorker::new(self.pipeline, self.start, self.checkpoint_every)
    }
}

impl<T: Send + 'static, E: TaskEncoder<Sample = T>> LoaderBuilder<T, E> {
    /// The loader of encoded samples whose workers run elsewhere: `links[w]` receives local
    /// worker `w`'s messages, served from [`LoaderBuilder::sample_worker`] of a builder with
    /// the same settings and state to restore.
    pub fn build_samples_linked(
        self,
        links: Vec<Box<dyn WorkerLink<Keyed<E::Encoded>>>>,
    ) -> Result<Loader<Keyed<E::Encoded>>> {
        self.build_linked(links, false)
    }

    /// The loader of batches whose workers run elsewhere (see
    /// [`LoaderBuilder::build_samples_linked`]), served from [`LoaderBuilder::batch_worker`].
    pub fn build_batches_linked(
        self,
        links: Vec<Box<dyn WorkerLink<Keyed<E::Output>>>>,
    ) -> Result<Loader<Keyed<E::Output>>> {
        self.build_linked(links, true)
    }

    fn build_linked<I: Send + 'static>(
        mut self,
        links: Vec<Box<dyn WorkerLink<Keyed<I>>>>,
        batches: bool,
    ) -> Result<Loader<Keyed<I>>> {
        let plan = self.plan()?;
        self.deal_reshaped_by(&plan, batches)?;
        let config = self.config_of(&plan);
        let stats = FailureStats::default();
        self.common.start_linked(links, &plan.worker_config, config, stats, batches)
    }

    /// Local worker `worker`'s whole pipeline of encoded samples and where it starts (the
    /// state to restore's position of that worker); failures are counted in `stats`.
    pub fn sample_worker(
        mut self,
        worker: usize,
        stats: &FailureStats,
    ) -> Result<WorkerPipeline<E::Encoded>> {
        let plan = self.plan()?;
        self.deal_reshaped_by(&plan, false)?;
        let encoded = self.encoded_pipelines(&plan, stats, Some(worker))?;
        let pipeline = self.common.sample_pipelines(&*self.encoder, encoded)?.pop();
        self.worker_pipeline(&plan, pipeline, worker, false)
    }

    /// Local worker `worker`'s whole pipeline of batches and where it starts (see
    /// [`LoaderBuilder::sample_worker`]).
    pub fn batch_worker(
        mut self,
        worker: usize,
        stats: &FailureStats,
    ) -> Result<WorkerPipeline<E::Output>> {
        let plan = self.plan()?;
        self.deal_reshaped_by(&plan, true)?;
        let encoded = self.encoded_pipelines(&plan, stats, Some(worker))?;
        let pipeline = self.common.batch_pipelines(&self.encoder, encoded)?.pop();
        self.worker_pipeline(&plan, pipeline, worker, true)
    }

    fn worker_pipeline<I>(
        &self,
        plan: &energon_mix::MixPlan,
        pipeline: Option<BoxStage<I>>,
        worker: usize,
        batches: bool,
    ) -> Result<WorkerPipeline<I>> {
        let pipeline = pipeline.ok_or_else(|| Error::InvalidSetting {
            setting: "worker",
            value: worker.to_string(),
            reason: "must be below the number of local workers (max(1, num_workers))",
        })?;
        let config = self.config_of(plan);
        let start = self.common.worker_start(&plan.worker_config, config, batches, worker)?;
        Ok(WorkerPipeline { pipeline, start, checkpoint_every: self.common.checkpoint_every })
    }

    /// Deals a reshaped state to restore over this rank's workers (see `deal_reshaped`),
    /// building the fresh pipelines it needs only when there is one.
    fn deal_reshaped_by(&mut self, plan: &energon_mix::MixPlan, batches: bool) -> Result<()> {
        if self.common.restore.as_ref().is_none_or(|s| s.reshaped.is_none()) {
            return Ok(());
        }
        let stats = FailureStats::default();
        if batches {
            let pipelines = self.batch_worker_pipelines(&stats)?;
            self.deal_reshaped(plan, &pipelines)
        } else {
            let pipelines = self.sample_worker_pipelines(&stats)?;
            self.deal_reshaped(plan, &pipelines)
        }
    }
}
