//! Restore keys: where an item came from, as the reference's `__restore_key__` tuples.
//!
//! Every stage that produces an item records how to produce it again: the leaf starts with
//! `("Webdataset", global_sample_index)`, each map stage prepends `("MapDataset", index)`, a batch
//! is `("BatchDataset", batch_index, *keys of its samples)`. The reference uses these keys to
//! re-create buffered samples on restore; here they also tell a user exactly which sample of which
//! stage an item is.

use std::{borrow::Cow, fmt};

use energon_dist::WorkerConfig;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One element of a [`RestoreKey`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// A stage name (`"Webdataset"`, `"MapDataset"`, ...).
    Name(Cow<'static, str>),
    /// An index.
    Index(u64),
    /// The nested key of an item a batch was made of.
    Key(RestoreKey),
}

/// The name that precedes a joined sample's `("Webdataset", row)` in its key.
pub(crate) const JOINED: &str = "JoinedWebdatasetFactory";

/// A restore key: a sequence of names, indices and nested keys, outermost stage first.
///
/// Serialized as nested arrays of strings and numbers in human-readable formats (JSON:
/// `["BatchDataset", 0, ["Webdataset", 5]]`), and as tagged parts in binary ones (postcard,
/// which cannot tell a string from a number by itself).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreKey {
    parts: Vec<KeyPart>,
}

impl RestoreKey {
    /// The key of a sample read from a dataset: `("Webdataset", index)` (also for JSONL, as in
    /// the reference).
    pub fn leaf(index: u64) -> Self {
        RestoreKey {
            parts: vec![
                KeyPart::Name(Cow::Borrowed(energon_reader::RESTORE_KEY_KIND)),
                KeyPart::Index(index),
            ],
        }
    }

    /// The key of a joined sample, row `index` of a join: `("JoinedWebdatasetFactory",
    /// "Webdataset", index)`, as the reference's join stage marks it.
    pub fn joined_leaf(index: u64) -> Self {
        let mut key = RestoreKey::leaf(index);
        key.parts.insert(0, KeyPart::Name(Cow::Borrowed(JOINED)));
        key
    }

    /// A key made of the given parts.
    pub fn from_parts(parts: Vec<KeyPart>) -> Self {
        RestoreKey { parts }
    }

    /// The parts, outermost first.
    pub fn parts(&self) -> &[KeyPart] {
        &self.parts
    }

    /// Whether the key starts with the stage name `stage`.
    pub fn starts_with(&self, stage: &str) -> bool {
        matches!(self.parts.first(), Some(KeyPart::Name(name)) if name == stage)
    }

    /// Prepends `(stage, index)`, as a stage that wraps an inner item does.
    pub fn prepend(&mut self, stage: &'static str, index: u64) {
        self.parts.splice(0..0, [KeyPart::Name(Cow::Borrowed(stage)), KeyPart::Index(index)]);
    }

    /// The key of a batch: `(stage, index, *keys)`.
    pub fn batch<'a>(
        stage: &'static str,
        index: u64,
        keys: impl IntoIterator<Item = &'a RestoreKey>,
    ) -> Self {
        let mut parts = vec![KeyPart::Name(Cow::Borrowed(stage)), KeyPart::Index(index)];
        parts.extend(keys.into_iter().map(|k| KeyPart::Key(k.clone())));
        RestoreKey { parts }
    }
}

/// The reference's loader wrapper, whose `(name, global_worker_id, worker_item_index)` starts
/// every key its loader hands out: `SavableDatasetWrapper` in the worker processes of a savable
/// loader, `SimpleSavableDatasetWrapper` in a basic loader or without worker processes.
///
/// The keys of energon-cook's items leave it out (a [`Loaded`](crate::Loaded) carries the
/// worker and its item index instead); [`RestoreKey::of_loader`] adds it, and a worker
/// pipeline's `restore_item` takes a key with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoaderWrapper {
    /// `SavableDatasetWrapper`.
    Savable,
    /// `SimpleSavableDatasetWrapper`.
    Simple,
}

impl LoaderWrapper {
    /// The reference's class name.
    pub fn name(self) -> &'static str {
        match self {
            LoaderWrapper::Savable => "SavableDatasetWrapper",
            LoaderWrapper::Simple => "SimpleSavableDatasetWrapper",
        }
    }

    /// The wrapper of a loader: a savable loader with worker threads has the savable one.
    pub fn of(savable: bool, num_workers: usize) -> Self {
        if savable && num_workers > 0 { LoaderWrapper::Savable } else { LoaderWrapper::Simple }
    }
}

impl RestoreKey {
    /// The key as the reference's loader hands it out:
    /// `(wrapper, global_worker_id, worker_item_index, *self)`.
    pub fn of_loader(&self, wrapper: LoaderWrapper, global_worker_id: u64, index: u64) -> Self {
        let mut parts = Vec::with_capacity(self.parts.len() + 3);
        parts.push(KeyPart::Name(Cow::Borrowed(wrapper.name())));
        parts.push(KeyPart::Index(global_worker_id));
        parts.push(KeyPart::Index(index));
        parts.extend(self.parts.iter().cloned());
        RestoreKey { parts }
    }
}

/// The global worker id in the reference's loader keys for local worker `local`:
/// `rank * num_workers + local`, which is 0 on every rank without worker threads (unlike
/// [`WorkerConfig::global_worker_id`], which seeds and slices).
pub fn loader_worker_id(config: &WorkerConfig, local: usize) -> u64 {
    (config.rank() * config.num_workers() + local) as u64
}

/// A loader's key split into its wrapper, global worker id, the worker's item index and the
/// key of the item inside the worker's pipeline; `None` if `key` does not start with a loader
/// wrapper.
pub fn split_loader_key(key: &[KeyPart]) -> Option<(LoaderWrapper, u64, u64, &[KeyPart])> {
    let [KeyPart::Name(name), KeyPart::Index(worker), KeyPart::Index(index), rest @ ..] = key
    else {
        return None;
    };
    let wrapper =
        [LoaderWrapper::Savable, LoaderWrapper::Simple].into_iter().find(|w| w.name() == name)?;
    Some((wrapper, *worker, *index, rest))
}

/// The human-readable form of a key part.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum HumanPart {
    Name(String),
    Index(u64),
    Key(Vec<HumanPart>),
}

/// The binary form of a key part.
#[derive(Serialize, Deserialize)]
enum BinaryPart {
    Name(String),
    Index(u64),
    Key(Vec<BinaryPart>),
}

impl From<&KeyPart> for HumanPart {
    fn from(part: &KeyPart) -> Self {
        match part {
            KeyPart::Name(name) => HumanPart::Name(name.to_string()),
            KeyPart::Index(index) => HumanPart::Index(*index),
            KeyPart::Key(key) => HumanPart::Key(key.parts.iter().map(Into::into).collect()),
        }
    }
}

impl From<HumanPart> for KeyPart {
    fn from(part: HumanPart) -> Self {
        match part {
            HumanPart::Name(name) => KeyPart::Name(Cow::Owned(name)),
            HumanPart::Index(index) => KeyPart::Index(index),
            HumanPart::Key(parts) => {
                KeyPart::Key(RestoreKey::from_parts(parts.into_iter().map(Into::into).collect()))
            }
        }
    }
}

impl From<&KeyPart> for BinaryPart {
    fn from(part: &KeyPart) -> Self {
        match part {
            KeyPart::Name(name) => BinaryPart::Name(name.to_string()),
            KeyPart::Index(index) => BinaryPart::Index(*index),
            KeyPart::Key(key) => BinaryPart::Key(key.parts.iter().map(Into::into).collect()),
        }
    }
}

impl From<BinaryPart> for KeyPart {
    fn from(part: BinaryPart) -> Self {
        match part {
            BinaryPart::Name(name) => KeyPart::Name(Cow::Owned(name)),
            BinaryPart::Index(index) => KeyPart::Index(index),
            BinaryPart::Key(parts) => {
                KeyPart::Key(RestoreKey::from_parts(parts.into_iter().map(Into::into).collect()))
            }
        }
    }
}

impl Serialize for RestoreKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if serializer.is_human_readable() {
            let parts: Vec<HumanPart> = self.parts.iter().map(Into::into).collect();
            parts.serialize(serializer)
        } else {
            let parts: Vec<BinaryPart> = self.parts.iter().map(Into::into).collect();
            parts.serialize(serializer)
        }
    }
}

impl<'de> Deserialize<'de> for RestoreKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parts: Vec<KeyPart> = if deserializer.is_human_readable() {
            Vec::<HumanPart>::deserialize(deserializer)?.into_iter().map(Into::into).collect()
        } else {
            Vec::<BinaryPart>::deserialize(deserializer)?.into_iter().map(Into::into).collect()
        };
        Ok(RestoreKey { parts })
    }
}

/// Prints the key as Python prints the reference's tuple: `('MapDataset', 3, 'Webdataset', 50)`.
impl fmt::Display for RestoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, part) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match part {
                KeyPart::Name(name) => write!(f, "'{name}'")?,
                KeyPart::Index(index) => write!(f, "{index}")?,
                KeyPart::Key(key) => write!(f, "{key}")?,
            }
        }
        if self.parts.len() == 1 {
            f.write_str(",")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_print_as_python_tuples() {
        let mut key = RestoreKey::leaf(50);
        key.prepend("MapDataset", 2);
        key.prepend("MapDataset", 0);
        assert_eq!(key.to_string(), "('MapDataset', 0, 'MapDataset', 2, 'Webdataset', 50)");
        let batch = RestoreKey::batch("BatchDataset", 1, [&key, &RestoreKey::leaf(7)]);
        assert_eq!(
            batch.to_string(),
            "('BatchDataset', 1, ('MapDataset', 0, 'MapDataset', 2, 'Webdataset', 50), \
             ('Webdataset', 7))"
        );
        let single = RestoreKey::from_parts(vec![KeyPart::Index(3)]);
        assert_eq!(single.to_string(), "(3,)");
        let loader = key.of_loader(LoaderWrapper::Savable, 3, 9);
        assert_eq!(
            loader.to_string(),
            "('SavableDatasetWrapper', 3, 9, 'MapDataset', 0, 'MapDataset', 2, 'Webdataset', 50)"
        );
        let (wrapper, worker, index, rest) = split_loader_key(loader.parts()).unwrap();
        assert_eq!((wrapper, worker, index, rest), (LoaderWrapper::Savable, 3, 9, key.parts()));
        assert_eq!(LoaderWrapper::of(false, 2), LoaderWrapper::Simple);
        assert_eq!(LoaderWrapper::of(true, 0), LoaderWrapper::Simple);
        assert!(split_loader_key(key.parts()).is_none());
        let mut other = loader.parts().to_vec();
        other[0] = KeyPart::Name(Cow::Borrowed("OtherWrapper"));
        assert!(split_loader_key(&other).is_none());
    }

    #[test]
    fn keys_serialize_as_nested_arrays() {
        let mut key = RestoreKey::leaf(5);
        key.prepend("MapDataset", 1);
        let batch = RestoreKey::batch("BatchDataset", 0, [&key]);
        let json = serde_json::to_string(&batch).unwrap();
        assert_eq!(json, r#"["BatchDataset",0,["MapDataset",1,"Webdataset",5]]"#);
        assert_eq!(serde_json::from_str::<RestoreKey>(&json).unwrap(), batch);
        let bytes = postcard::to_stdvec(&batch).unwrap();
        assert_eq!(postcard::from_bytes::<RestoreKey>(&bytes).unwrap(), batch);
    }
}
