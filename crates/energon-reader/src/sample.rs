//! Samples: the reference's sample types as Rust types with the same field names, and crude
//! samples (a plain ordered map of decoded parts) for cookers.
//!
//! The base fields every sample has (`__key__`, `__restore_key__`, `__subflavors__`,
//! `__sources__`) are in [`SampleMeta`]; the fields of each type keep the reference's names
//! (`image`, `caption`, `label_name`, ...). Fields the reference types as tensors but that a
//! field map may fill from JSON (boxes, weights, matrices) hold any [`Decoded`] value.

mod convert;
mod types;

use std::sync::Arc;

use energon_index::dataset_config::ClassRef;
use serde_json::{Map, Value};

pub use self::{
    convert::{Field, FieldValue, FromDecoded, IntoField, IntoFieldValue, Mismatch},
    types::*,
};
use crate::{
    decode::Decoded,
    raw::{RESTORE_KEY_KIND, SourceInfo},
};

/// The fields of the reference's base `Sample` class, shared by every sample.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleMeta {
    /// `__key__`: the sample key.
    pub key: String,
    /// `__restore_key__`: `("Webdataset", global sample index)`.
    pub restore_key: (&'static str, u64),
    /// `__subflavors__`: the dataset's subflavors (shared by all its samples).
    pub subflavors: Option<Arc<Map<String, Value>>>,
    /// `__sources__`: where the sample's parts came from.
    pub sources: Vec<SourceInfo>,
}

impl SampleMeta {
    /// Metadata for a sample read at global `index`.
    pub fn new(
        key: String,
        index: u64,
        subflavors: Option<Arc<Map<String, Value>>>,
        sources: Vec<SourceInfo>,
    ) -> Self {
        SampleMeta { key, restore_key: (RESTORE_KEY_KIND, index), subflavors, sources }
    }
}

/// A crude sample (the reference's `CrudeSample`, a dict): every part read, decoded, in tar
/// order, for cookers to turn into a typed sample.
#[derive(Debug, Clone, PartialEq)]
pub struct CrudeSample {
    /// `__key__`, `__restore_key__`, `__subflavors__`, `__sources__`.
    pub meta: SampleMeta,
    /// `__shard__`: the shard name.
    pub shard: Arc<str>,
    /// The parts: part name (`jpg`, `json`, ...) and decoded value.
    pub parts: Vec<(String, Decoded)>,
}

/// A sample of a class that is not one of the built-in types (a user's class from
/// `dataset.yaml`, or a built-in one whose field map yields values of other types than its
/// fields declare): the fields its field map filled, for the caller to instantiate the class
/// with (the reference's `sample_type(**fields)`, which does not check types).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldsSample {
    /// `__key__`, `__restore_key__`, `__subflavors__`, `__sources__`.
    pub meta: SampleMeta,
    /// The class (`module`, `class`), as `dataset.yaml` names it.
    pub class: Arc<ClassRef>,
    /// The fields, in field map order, with the values the field map gave.
    pub fields: Vec<(String, Decoded)>,
}

impl CrudeSample {
    /// The value of part `name`, if the sample has it.
    pub fn get(&self, name: &str) -> Option<&Decoded> {
        self.parts.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

impl Sample {
    /// The crude sample, if this is one.
    pub fn as_crude(&self) -> Option<&CrudeSample> {
        match self {
            Sample::Crude(c) => Some(c),
            _ => None,
        }
    }

    /// The sample key (`__key__`).
    pub fn key(&self) -> &str {
        &self.meta().key
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReaderOptions, SampleReader};

    #[test]
    fn into_fields_moves_the_fields_in_declaration_order() {
        let reader =
            SampleReader::open(&energon_tests::ref_small_dir(), &ReaderOptions::default()).unwrap();
        let sample = reader.read(0).unwrap().unwrap();
        let names: Vec<String> = sample.fields().iter().map(|(n, _)| (*n).to_owned()).collect();
        let (meta, fields) = sample.clone().into_fields();
        assert_eq!(&meta, sample.meta());
        assert_eq!(fields.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(), names);
        assert!(matches!(&fields[0].1, Field::Tensor(t) if t.shape == [32, 32, 3]));
        assert_eq!(fields[1].1, Field::Text("cat and a large small".to_owned()));
    }
}
