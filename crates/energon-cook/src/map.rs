//! The map stage: applies a function to every item (the reference's `MapDataset`).

use crate::{
    error::{Error, Result},
    restore_key::KeyPart,
    stage::{Keyed, Stage, bad_key, split_key},
    state::{StageState, mismatch},
};

/// Applies `f` to each item of the inner stage and prepends `("MapDataset", index)` to its restore
/// key, where `index` counts the items this stage has taken in (across passes, skipped ones
/// included). `f` returning `Ok(None)` skips the item (the reference's `SkipSample`).
pub struct Map<S, F> {
    inner: S,
    f: F,
    sample_index: u64,
}

impl<S, F> Map<S, F> {
    /// Maps the items of `inner` with `f`.
    pub fn new(inner: S, f: F) -> Self {
        Map { inner, f, sample_index: 0 }
    }

    /// The savable progress: how many items have been taken in (the reference's `_sample_index`).
    pub fn sample_index(&self) -> u64 {
        self.sample_index
    }

    /// The inner stage.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: std::fmt::Debug, F> std::fmt::Debug for Map<S, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Map")
            .field("inner", &self.inner)
            .field("sample_index", &self.sample_index)
            .finish_non_exhaustive()
    }
}

impl<T, U, S, F> Stage for Map<S, F>
where
    S: Stage<Item = Keyed<T>>,
    F: FnMut(T) -> Result<Option<U>> + Send,
{
    type Item = Keyed<U>;

    fn next(&mut self) -> Result<Option<Keyed<U>>> {
        while let Some(item) = self.inner.next()? {
            let index = self.sample_index;
            self.sample_index += 1;
            if let Some(value) = (self.f)(item.value)? {
                let mut restore_key = item.restore_key;
                restore_key.prepend("MapDataset", index);
                return Ok(Some(Keyed { restore_key, value }));
            }
        }
        Ok(None)
    }

    fn len_worker(&self) -> u64 {
        self.inner.len_worker()
    }

    fn state(&self) -> Result<StageState> {
        Ok(StageState::Map {
            index: self.sample_index,
            failures: 0,
            pending: None,
            inner: Box::new(self.inner.state()?),
        })
    }

    fn restore(&mut self, state: &StageState) -> Result<()> {
        let StageState::Map { index, pending, inner, .. } = state else {
            return Err(mismatch("map stage", state));
        };
        if pending.is_some() {
            return Err(Error::BadState {
                reason: "a map stage of single outputs cannot continue a generator".to_owned(),
            });
        }
        self.inner.restore(inner)?;
        self.sample_index = *index;
        Ok(())
    }

    fn restore_item(&mut self, key: &[KeyPart]) -> Result<Keyed<U>> {
        let Some((index, rest)) = split_key("MapDataset", key) else {
            return Err(bad_key("map stage", key));
        };
        let item = self.inner.restore_item(rest)?;
        let Some(value) = (self.f)(item.value)? else {
            return Err(Error::BadState {
                reason: format!("the map function skipped {} on restore", item.restore_key),
            });
        };
        let mut restore_key = item.restore_key;
        restore_key.prepend("MapDataset", index);
        Ok(Keyed { restore_key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FnStage, RestoreKey};

    fn numbers(n: u64) -> impl Stage<Item = Keyed<u64>> {
        let mut i = 0;
        FnStage::new(n, move || {
            if i == n {
                i = 0;
                return Ok(None);
            }
            i += 1;
            Ok(Some(Keyed { restore_key: RestoreKey::leaf(i - 1), value: i - 1 }))
        })
    }

    #[test]
    fn skipped_items_still_count() {
        let mut map = Map::new(numbers(5), |x: u64| Ok(x.is_multiple_of(2).then_some(x * 10)));
        let mut got = Vec::new();
        while let Some(item) = map.next().unwrap() {
            got.push((item.restore_key.to_string(), item.value));
        }
        assert_eq!(
            got,
            [
                ("('MapDataset', 0, 'Webdataset', 0)".to_owned(), 0),
                ("('MapDataset', 2, 'Webdataset', 2)".to_owned(), 20),
                ("('MapDataset', 4, 'Webdataset', 4)".to_owned(), 40),
            ]
        );
        assert_eq!(map.sample_index(), 5);
        // The next pass continues the count.
        assert_eq!(
            map.next().unwrap().unwrap().restore_key.to_string(),
            "('MapDataset', 5, 'Webdataset', 0)"
        );
    }

    #[test]
    fn errors_pass_through() {
        let mut map = Map::new(numbers(3), |_: u64| -> Result<Option<u64>> {
            Err(crate::Error::InvalidSetting { setting: "x", value: "1".into(), reason: "test" })
        });
        assert!(map.next().is_err());
    }
}
