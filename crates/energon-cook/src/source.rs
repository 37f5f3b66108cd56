//! The leaf stage: a worker's slice order (energon-reader's [`LeafIter`]) joined with a sample
//! reader.

use energon_reader::leaf::LeafIter;

use crate::{
    error::{Error, Result},
    restore_key::{KeyPart, RestoreKey},
    stage::{Keyed, Stage, bad_key, split_key},
    state::{StageState, mismatch},
};

/// Reads the samples of one worker in the leaf's order (the reference's
/// `WebdatasetSampleLoaderDataset`): each index from the [`LeafIter`] goes to `read`; a sample that
/// `read` reports as excluded (`Ok(None)`) is skipped, but still counts as read, as in the
/// reference. Items carry the key `("Webdataset", index)`.
pub struct LeafSource<R> {
    leaf: LeafIter,
    read: R,
}

impl<R> LeafSource<R> {
    /// A leaf stage over `leaf` reading with `read`.
    pub fn new(leaf: LeafIter, read: R) -> Self {
        LeafSource { leaf, read }
    }

    /// The slice iteration.
    pub fn leaf(&self) -> &LeafIter {
        &self.leaf
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
            if let Some(value) = (self.read)(index)? {
                return Ok(Some(Keyed { restore_key: RestoreKey::leaf(index), value }));
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
        let Some((index, [])) = split_key(energon_reader::RESTORE_KEY_KIND, key) else {
            return Err(bad_key("leaf", key));
        };
        match (self.read)(index)? {
            Some(value) => Ok(Keyed { restore_key: RestoreKey::leaf(index), value }),
            None => Err(Error::BadState {
                reason: format!("sample {index} is excluded and cannot have been buffered"),
            }),
        }
    }
}
