//! A ready-made leaf source: a leaf's slice iteration joined with a reading function, yielding
//! [`MixItem`]s that remember their leaf, sample index and route through the combiners.
//!
//! The loader builds its own leaf stages (decoding, cooking); this source serves tools that only
//! need the order (`energon trace`) and tests.

use energon_reader::leaf::{LeafIter, LeafState};

use crate::{
    error::{Error, Result},
    plan::{LeafSample, MixPlan},
    runtime::{Combiner, Mix, Source, Tag},
};

/// An item of a leaf, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct MixItem<T> {
    /// The leaf (position in the plan).
    pub leaf: usize,
    /// The global sample index in the leaf (the join row for a join).
    pub index: u64,
    /// The combiners the item went through and the child it came from, outermost first.
    pub route: Vec<(Combiner, usize)>,
    /// What was read.
    pub value: T,
}

impl<T> Tag for MixItem<T> {
    fn tag(mut self, combiner: Combiner, child: usize) -> Self {
        self.route.insert(0, (combiner, child));
        self
    }
}

impl<T> MixItem<T> {
    /// The restore key as the reference prints it, up to the leaf:
    /// `('BlendDataset', 1, 'Webdataset', 42)`.
    pub fn restore_key(&self) -> String {
        let mut parts: Vec<String> =
            self.route.iter().map(|(c, i)| format!("'{}', {i}", c.name())).collect();
        parts.push(format!("'{}', {}", energon_reader::RESTORE_KEY_KIND, self.index));
        format!("({})", parts.join(", "))
    }
}

/// A leaf source: each index of the slice iteration goes to `read`; an excluded sample
/// (`Ok(None)`) is skipped but counts as read, as in the reference.
pub struct ReadLeaf<F> {
    leaf: usize,
    iter: LeafIter,
    read: F,
}

impl<F> std::fmt::Debug for ReadLeaf<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadLeaf")
            .field("leaf", &self.leaf)
            .field("iter", &self.iter)
            .finish_non_exhaustive()
    }
}

impl<F> ReadLeaf<F> {
    /// The source of leaf `leaf` over `iter`, reading with `read`.
    pub fn new(leaf: usize, iter: LeafIter, read: F) -> Self {
        ReadLeaf { leaf, iter, read }
    }

    /// The slice iteration (its progress is the leaf's savable state).
    pub fn iter(&self) -> &LeafIter {
        &self.iter
    }

    /// The savable progress of the leaf.
    pub fn state(&self) -> LeafState {
        self.iter.state()
    }

    /// Continues from a saved progress of the same leaf on the same worker.
    pub fn restore(&mut self, state: LeafState) -> Result<()> {
        let slices = self.iter.slices().clone();
        let config = *self.iter.config();
        self.iter = LeafIter::from_state(slices, config, state).ok_or_else(|| Error::BadState {
            reason: format!("the saved progress does not fit the slices of leaf {}", self.leaf),
        })?;
        Ok(())
    }
}

impl<T, F> Source for ReadLeaf<F>
where
    F: FnMut(u64) -> Result<Option<T>>,
{
    type Item = MixItem<T>;
    type Error = Error;

    fn next(&mut self) -> Result<Option<MixItem<T>>> {
        while let Some(index) = self.iter.next_index()? {
            if let Some(value) = (self.read)(index)? {
                return Ok(Some(MixItem { leaf: self.leaf, index, route: Vec::new(), value }));
            }
        }
        Ok(None)
    }

    fn len_worker(&self) -> u64 {
        self.iter.len_worker()
    }
}

/// A leaf source reading [`LeafSample`]s.
pub type SampleLeaf = ReadLeaf<Box<dyn FnMut(u64) -> Result<Option<LeafSample>> + Send>>;

impl MixPlan {
    /// The stages of local worker `worker`, reading raw samples (or joined samples) of every leaf.
    pub fn sample_worker(&self, worker: usize) -> Result<Mix<SampleLeaf>> {
        self.build_worker(worker, |i, leaf, iter| {
            let data = leaf.data.clone();
            let read: Box<dyn FnMut(u64) -> Result<Option<LeafSample>> + Send> =
                Box::new(move |index| data.read(index));
            Ok(ReadLeaf::new(i, iter, read))
        })
    }
}
