//! [`Concat`]: children one after the other, for validation and test splits.

use super::{Combiner, Source, Tag};
use crate::{error::Error, state::ConcatState};

/// Yields the pass of each child in order, then ends its own pass (the reference's
/// `ConcatDataset`). Items are tagged with their child.
#[derive(Debug, Clone)]
pub struct Concat<S> {
    children: Vec<S>,
    current: usize,
}

impl<S: Source> Concat<S>
where
    S::Item: Tag,
{
    /// The concatenation of `children` (at least one).
    pub fn new(children: Vec<S>) -> Result<Self, Error> {
        if children.is_empty() {
            return Err(Error::InvalidOption {
                option: "concat",
                value: "0 children".to_owned(),
                reason: "needs at least one child".to_owned(),
            });
        }
        Ok(Concat { children, current: 0 })
    }

    /// The children.
    pub fn children(&self) -> &[S] {
        &self.children
    }

    /// The children, mutably (to save or restore their states).
    pub fn children_mut(&mut self) -> &mut [S] {
        &mut self.children
    }

    /// The savable progress: the child being read.
    pub fn state(&self) -> ConcatState {
        ConcatState { current: self.current }
    }

    /// Continues from a saved progress; the children's states are restored separately.
    pub fn restore(&mut self, state: &ConcatState) -> Result<(), Error> {
        if state.current >= self.children.len() {
            return Err(Error::BadState {
                reason: format!(
                    "child {} of a concatenation of {}",
                    state.current,
                    self.children.len()
                ),
            });
        }
        self.current = state.current;
        Ok(())
    }
}

impl<S: Source> Source for Concat<S>
where
    S::Item: Tag,
{
    type Item = S::Item;
    type Error = S::Error;

    fn next(&mut self) -> Result<Option<S::Item>, S::Error> {
        while self.current < self.children.len() {
            if let Some(item) = self.children[self.current].next()? {
                return Ok(Some(item.tag(Combiner::Concat, self.current)));
            }
            self.current += 1;
        }
        self.current = 0;
        Ok(None)
    }

    fn len_worker(&self) -> u64 {
        self.children.iter().map(Source::len_worker).sum()
    }

    fn has_samples(&self) -> bool {
        self.children.iter().any(Source::has_samples)
    }
}
