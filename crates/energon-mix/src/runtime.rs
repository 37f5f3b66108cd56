//! The per-worker stages that combine leaf datasets, generic over what they carry.
//!
//! Each stage is the reference's re-iterable dataset turned into an explicit state machine, pulled
//! one item at a time through [`Source::next`]: `Some(item)` within a pass, `None` once at the end
//! of a pass, and the call after that starts the next pass (as calling `iter()` again on the
//! reference's dataset does). All progress lives in the stage, so a consumer that stops pulling
//! in the middle of a pass and comes back continues where it stopped, exactly as the reference's
//! datasets keep their state outside the generator.
//!
//! - [`Repeat`]: the passes of its child, forever or a (possibly fractional) number of times.
//! - [`Blend`]: one weighted draw per step over all children (the reference's `BlendDataset`).
//! - [`Concat`]: the children one after the other (validation).
//! - [`Mix`]: a tree of these over the leaf sources, as [`MixPlan`](crate::MixPlan) builds it.
//!
//! Stages never look at items; [`Blend`] and [`Concat`] only [`Tag`] them with the child they
//! came from (the reference prepends `("BlendDataset", i)` to the restore key).

mod blend;
mod concat;
mod mix;
mod repeat;
#[cfg(test)]
mod tests;

pub use self::{blend::Blend, concat::Concat, mix::Mix, repeat::Repeat};
use crate::error::Error;

/// A per-worker stream of items, iterated in passes.
pub trait Source {
    /// What the stream yields.
    type Item;
    /// The error type; the stages of this crate report their own errors through it.
    type Error: From<Error>;

    /// The next item of the current pass, or `None` at the end of the pass (the following call
    /// starts the next pass).
    fn next(&mut self) -> Result<Option<Self::Item>, Self::Error>;

    /// The number of samples on this worker (the reference's `len_worker`): a fractional
    /// repetition cuts its last pass after `floor(len_worker * fraction)` items, and a child
    /// without samples gets blend weight 0.
    fn len_worker(&self) -> u64;

    /// Whether the stream has samples on this worker at all (the reference's
    /// `worker_has_samples`): a blend gives a child without samples weight 0 and never draws it.
    /// This differs from `len_worker() > 0` for a fractional repetition whose cut rounds down
    /// to 0: it has samples, and a blend draws it (to find it exhausted).
    fn has_samples(&self) -> bool {
        self.len_worker() > 0
    }
}

impl<S: Source + ?Sized> Source for Box<S> {
    type Item = S::Item;
    type Error = S::Error;

    fn next(&mut self) -> Result<Option<S::Item>, S::Error> {
        (**self).next()
    }

    fn len_worker(&self) -> u64 {
        (**self).len_worker()
    }

    fn has_samples(&self) -> bool {
        (**self).has_samples()
    }
}

/// A stage that combines children and records which child an item came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combiner {
    /// [`Blend`].
    Blend,
    /// [`Concat`].
    Concat,
}

impl Combiner {
    /// The reference's class name, the first element of the restore-key prefix
    /// (`("BlendDataset", child)`).
    pub fn name(self) -> &'static str {
        match self {
            Combiner::Blend => "BlendDataset",
            Combiner::Concat => "ConcatDataset",
        }
    }
}

/// Items that can record the child of a combining stage they came from.
///
/// The loader's keyed items prepend `(combiner.name(), child)` to their restore key; items
/// that need no key can ignore it.
pub trait Tag {
    /// The item, marked as coming from child `child` of a `combiner` stage.
    fn tag(self, combiner: Combiner, child: usize) -> Self;
}
