//! The stage abstraction: one step of a worker's pipeline, pulled one item at a time.
//!
//! A stage is the reference's re-iterable dataset turned into an explicit state machine:
//! [`Stage::next`] returns the next item of the current pass, `None` once at the end of a pass, and
//! the call after that starts the next pass (as calling `iter()` again on the reference's dataset
//! does). All progress lives in the stage, so a consumer that stops pulling and comes back later
//! continues where it stopped; nothing depends on a Python generator's hidden frame.

use crate::{
    error::{Error, Result},
    restore_key::{KeyPart, RestoreKey},
    state::StageState,
};

/// One step of a per-worker pipeline.
pub trait Stage: Send {
    /// What the stage yields.
    type Item;

    /// The next item of the current pass, or `None` at the end of the pass (the following call
    /// starts the next pass).
    fn next(&mut self) -> Result<Option<Self::Item>>;

    /// The number of samples this worker's leaf holds (the reference's `len_worker`), which a
    /// fractional repetition needs to know where to cut.
    fn len_worker(&self) -> u64;

    /// Whether the stage has samples on this worker at all (the reference's
    /// `worker_has_samples`): a blend gives a child without samples weight 0 and never draws it.
    /// This differs from `len_worker() > 0` for a fractional repetition whose cut rounds down to
    /// 0: it has samples, and a blend draws it (to find it exhausted).
    fn has_samples(&self) -> bool {
        self.len_worker() > 0
    }

    /// The stage's complete progress, its inner stages' included (for checkpoints).
    ///
    /// The default reports that the stage cannot be saved; a loader then saves the position of
    /// the consumer instead and replays the items up to it on restore.
    fn state(&self) -> Result<StageState> {
        Err(Error::NotSavable { stage: std::any::type_name::<Self>() })
    }

    /// Continues from a progress [`Stage::state`] returned for a stage built the same way;
    /// buffered items are re-created from their restore keys.
    fn restore(&mut self, state: &StageState) -> Result<()> {
        let _ = state;
        Err(Error::NotSavable { stage: std::any::type_name::<Self>() })
    }

    /// Re-creates the item with restore key `key` (as this stage's items carry it), without
    /// changing the stage's progress: re-reads the sample and re-runs the functions of the
    /// stages it went through, with the same indices (so the same per-sample seeds).
    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Self::Item> {
        let _ = key;
        Err(Error::NotSavable { stage: std::any::type_name::<Self>() })
    }
}

impl<S: Stage + ?Sized> Stage for Box<S> {
    type Item = S::Item;

    fn next(&mut self) -> Result<Option<Self::Item>> {
        (**self).next()
    }

    fn len_worker(&self) -> u64 {
        (**self).len_worker()
    }

    fn has_samples(&self) -> bool {
        (**self).has_samples()
    }

    fn state(&self) -> Result<StageState> {
        (**self).state()
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        (**self).restore(state)
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Self::Item> {
        (**self).restore_item(key)
    }
}

/// The error for a restore key that does not start the way a stage's keys do.
pub(crate) fn bad_key(stage: &'static str, key: &[KeyPart]) -> Error {
    Error::BadState {
        reason: format!(
            "restore key {} is not one of a {stage}",
            RestoreKey::from_parts(key.to_vec())
        ),
    }
}

/// Splits `(name, index, rest...)` off a key, if it starts with `name`.
pub(crate) fn split_key<'a>(name: &str, key: &'a [KeyPart]) -> Option<(u64, &'a [KeyPart])> {
    match key {
        [KeyPart::Name(n), KeyPart::Index(index), rest @ ..] if n == name => Some((*index, rest)),
        _ => None,
    }
}

/// An item with the key that identifies it (the reference keeps it in the sample's
/// `__restore_key__` field; here the envelope carries it, so stages need not know what an item
/// is).
#[derive(Debug, Clone, PartialEq)]
pub struct Keyed<T> {
    /// Where the item came from.
    pub restore_key: RestoreKey,
    /// The item.
    pub value: T,
}

impl<T> Keyed<T> {
    /// Applies `f` to the value, keeping the key.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Keyed<U> {
        Keyed { restore_key: self.restore_key, value: f(self.value) }
    }
}

/// A stage made of a closure, for tests and ad-hoc sources: `next` and a fixed `len_worker`.
pub struct FnStage<F> {
    next: F,
    len_worker: u64,
}

impl<F> FnStage<F> {
    /// A stage that calls `next` for each item and reports `len_worker` samples.
    pub fn new(len_worker: u64, next: F) -> Self {
        FnStage { next, len_worker }
    }
}

impl<F> std::fmt::Debug for FnStage<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnStage").field("len_worker", &self.len_worker).finish_non_exhaustive()
    }
}

impl<T, F: FnMut() -> Result<Option<T>> + Send> Stage for FnStage<F> {
    type Item = T;

    fn next(&mut self) -> Result<Option<T>> {
        (self.next)()
    }

    fn len_worker(&self) -> u64 {
        self.len_worker
    }
}
