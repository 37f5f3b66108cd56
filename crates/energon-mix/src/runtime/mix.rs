//! [`Mix`]: the tree of combining stages over the leaf sources of one worker.

use super::{Blend, Concat, Repeat, Source, Tag};
use crate::{error::Error, state::MixState};

/// The stages of one worker over its leaf sources `S`, as [`MixPlan`](crate::MixPlan) builds
/// them from the blend mode (the reference's `build_train_datasets` / `build_val_datasets`).
#[derive(Debug, Clone)]
pub enum Mix<S> {
    /// A leaf source.
    Leaf(S),
    /// A repetition of a subtree.
    Repeat(Box<Repeat<Mix<S>>>),
    /// A blend of subtrees.
    Blend(Blend<Mix<S>>),
    /// A concatenation of subtrees.
    Concat(Concat<Mix<S>>),
}

impl<S: Source> Mix<S>
where
    S::Item: Tag,
{
    /// The leaf sources in tree order (= the order of the resolved leaves).
    pub fn leaves(&self) -> Vec<&S> {
        let mut res = Vec::new();
        self.collect(&mut res);
        res
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a S>) {
        match self {
            Mix::Leaf(leaf) => out.push(leaf),
            Mix::Repeat(repeat) => repeat.inner().collect(out),
            Mix::Blend(blend) => blend.children().iter().for_each(|c| c.collect(out)),
            Mix::Concat(concat) => concat.children().iter().for_each(|c| c.collect(out)),
        }
    }

    /// The leaf sources in tree order, mutably (to save or restore their progress).
    pub fn leaves_mut(&mut self) -> Vec<&mut S> {
        let mut res = Vec::new();
        self.collect_mut(&mut res);
        res
    }

    fn collect_mut<'a>(&'a mut self, out: &mut Vec<&'a mut S>) {
        match self {
            Mix::Leaf(leaf) => out.push(leaf),
            Mix::Repeat(repeat) => repeat.inner_mut().collect_mut(out),
            Mix::Blend(blend) => blend.children_mut().iter_mut().for_each(|c| c.collect_mut(out)),
            Mix::Concat(concat) => {
                concat.children_mut().iter_mut().for_each(|c| c.collect_mut(out));
            }
        }
    }

    /// The progress of every combining stage (leaves are placeholders).
    pub fn state(&self) -> MixState {
        match self {
            Mix::Leaf(_) => MixState::Leaf,
            Mix::Repeat(repeat) => {
                MixState::Repeat { state: repeat.state(), inner: Box::new(repeat.inner().state()) }
            }
            Mix::Blend(blend) => MixState::Blend {
                state: blend.state(),
                children: blend.children().iter().map(Mix::state).collect(),
            },
            Mix::Concat(concat) => MixState::Concat {
                state: concat.state(),
                children: concat.children().iter().map(Mix::state).collect(),
            },
        }
    }

    /// Restores the progress of every combining stage from `state`, which must have the same
    /// shape as this tree; the leaves' progress is restored separately.
    pub fn restore(&mut self, state: &MixState) -> Result<(), Error> {
        let mismatch =
            || Error::BadState { reason: "the saved stages do not match this metadataset".into() };
        match (self, state) {
            (Mix::Leaf(_), MixState::Leaf) => Ok(()),
            (Mix::Repeat(repeat), MixState::Repeat { state, inner }) => {
                repeat.restore(state);
                repeat.inner_mut().restore(inner)
            }
            (Mix::Blend(blend), MixState::Blend { state, children }) => {
                blend.restore(state)?;
                restore_children(blend.children_mut(), children).ok_or_else(mismatch)?
            }
            (Mix::Concat(concat), MixState::Concat { state, children }) => {
                concat.restore(state)?;
                restore_children(concat.children_mut(), children).ok_or_else(mismatch)?
            }
            _ => Err(mismatch()),
        }
    }
}

fn restore_children<S: Source>(
    children: &mut [Mix<S>],
    states: &[MixState],
) -> Option<Result<(), Error>>
where
    S::Item: Tag,
{
    if children.len() != states.len() {
        return None;
    }
    Some(children.iter_mut().zip(states).try_for_each(|(child, state)| child.restore(state)))
}

impl<S: Source> Source for Mix<S>
where
    S::Item: Tag,
{
    type Item = S::Item;
    type Error = S::Error;

    fn next(&mut self) -> Result<Option<S::Item>, S::Error> {
        match self {
            Mix::Leaf(leaf) => leaf.next(),
            Mix::Repeat(repeat) => repeat.next(),
            Mix::Blend(blend) => blend.next(),
            Mix::Concat(concat) => concat.next(),
        }
    }

    fn len_worker(&self) -> u64 {
        match self {
            Mix::Leaf(leaf) => leaf.len_worker(),
            Mix::Repeat(repeat) => repeat.len_worker(),
            Mix::Blend(blend) => blend.len_worker(),
            Mix::Concat(concat) => concat.len_worker(),
        }
    }

    fn has_samples(&self) -> bool {
        match self {
            Mix::Leaf(leaf) => leaf.has_samples(),
            Mix::Repeat(repeat) => repeat.has_samples(),
            Mix::Blend(blend) => blend.has_samples(),
            Mix::Concat(concat) => concat.has_samples(),
        }
    }
}
