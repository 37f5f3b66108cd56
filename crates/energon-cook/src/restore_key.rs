//! Restore keys: where an item came from, as the reference's `__restore_key__` tuples.
//!
//! Every stage that produces an item records how to produce it again: the leaf starts with
//! `("Webdataset", global_sample_index)`, each map stage prepends `("MapDataset", index)`, a batch
//! is `("BatchDataset", batch_index, *keys of its samples)`. The reference uses these keys to
//! re-create buffered samples on restore; here they also tell a user exactly which sample of which
//! stage an item is.

use std::{borrow::Cow, fmt};

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
