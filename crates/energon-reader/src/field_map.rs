//! Filling sample fields from a `field_map`: alternatives (`jpg,png`) and accessors
//! (`json[items][0]`), decoding each part at most once and only when a field needs it.

use energon_index::dataset_config::{FieldAccess, FieldMap, list_index};
use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::{
    Error, Result,
    decode::{Decoded, Decoder},
    error::SampleAt,
    raw::RawSample,
    sample::FromDecoded,
};

/// Part names that stand for sample attributes rather than tar members, as in the reference's
/// raw sample dict.
const KEY_PART: &str = "__key__";
const SHARD_PART: &str = "__shard__";

/// How often each part is named by a field map (a part used once can be moved into its field
/// instead of copied).
#[derive(Debug, Clone, Default)]
pub(crate) struct PartUses(FxHashMap<String, usize>);

impl PartUses {
    pub(crate) fn of(field_map: &FieldMap) -> Self {
        let mut uses = FxHashMap::default();
        for (_, spec) in &field_map.0 {
            for alt in &spec.alternatives {
                *uses.entry(alt.part.clone()).or_insert(0) += 1;
            }
        }
        PartUses(uses)
    }
}

/// The values of one raw sample, as a field map reads them.
#[derive(Debug)]
pub(crate) struct FieldSource<'a> {
    raw: &'a RawSample,
    decoder: Option<&'a Decoder>,
    field_map: &'a FieldMap,
    uses: &'a PartUses,
    /// Decoded parts, by position in `raw.parts`.
    decoded: Vec<Option<Decoded>>,
    /// Whether a field's value did not have the type of the field.
    mismatched: bool,
}

impl<'a> FieldSource<'a> {
    pub(crate) fn new(
        raw: &'a RawSample,
        decoder: Option<&'a Decoder>,
        field_map: &'a FieldMap,
        uses: &'a PartUses,
    ) -> Self {
        let decoded = vec![None; raw.parts.len()];
        FieldSource { raw, decoder, field_map, uses, decoded, mismatched: false }
    }

    /// Every field of the field map, in its order, with the value it resolves to.
    pub(crate) fn all(&mut self) -> Result<Vec<(String, Decoded)>> {
        let field_map = self.field_map;
        let mut fields = Vec::with_capacity(field_map.0.len());
        for (field, _) in &field_map.0 {
            let value = self.lookup(field)?.expect("the field is in the field map");
            fields.push((field.clone(), value));
        }
        Ok(fields)
    }

    /// Whether a field failed because its value did not have the type of the field (rather
    /// than because it could not be found or decoded).
    pub(crate) fn mismatched(&self) -> bool {
        self.mismatched
    }

    /// A field that must be mapped and resolve.
    pub(crate) fn required<T: FromDecoded>(&mut self, field: &str) -> Result<T> {
        match self.lookup(field)? {
            Some(value) => {
                T::from_decoded(value).map_err(|reason| self.mismatch(field, reason.to_string()))
            }
            None => Err(self.field_error(
                field,
                "the field is required but the field_map does not map it".to_owned(),
            )),
        }
    }

    /// A field with default `None`: unmapped gives `None`; mapped, it must resolve.
    pub(crate) fn optional<T: FromDecoded>(&mut self, field: &str) -> Result<Option<T>> {
        match self.lookup(field)? {
            Some(value) => T::from_decoded(value)
                .map(Some)
                .map_err(|reason| self.mismatch(field, reason.to_string())),
            None => Ok(None),
        }
    }

    /// An integer field with default 0.
    pub(crate) fn zero(&mut self, field: &str) -> Result<i64> {
        Ok(self.optional(field)?.unwrap_or(0))
    }

    /// The value of a mapped field: the first alternative that resolves. `None` if unmapped.
    fn lookup(&mut self, field: &str) -> Result<Option<Decoded>> {
        let field_map = self.field_map;
        let Some(spec) = field_map.get(field) else { return Ok(None) };
        let mut failures = Vec::new();
        for alt in &spec.alternatives {
            match self.resolve(alt)? {
                Ok(value) => return Ok(Some(value)),
                Err(reason) => failures.push(reason),
            }
        }
        Err(Error::Field {
            at: Box::new(self.at(self.raw.offset)),
            field: field.to_owned(),
            spec: spec.raw.clone(),
            reason: failures.join("; "),
        })
    }

    /// One alternative: `Ok(Err(reason))` when it does not apply (the next one is tried),
    /// `Err` when its part cannot be decoded.
    fn resolve(&mut self, alt: &FieldAccess) -> Result<Result<Decoded, String>> {
        let value = match alt.part.as_str() {
            KEY_PART => Decoded::Text(self.raw.key.clone()),
            SHARD_PART => Decoded::Text(self.raw.shard.to_string()),
            part => {
                let Some(pos) = self.raw.parts.iter().position(|p| p.name == part) else {
                    return Ok(Err(format!("the sample has no part {part:?}")));
                };
                let movable = alt.keys.is_empty() && self.uses.0.get(part) == Some(&1);
                match self.decoded_part(pos)? {
                    Some(value) if movable => value,
                    Some(value) => {
                        self.decoded[pos] = Some(value.clone());
                        value
                    }
                    None => return Ok(Err(format!("part {part:?} was already used"))),
                }
            }
        };
        if alt.keys.is_empty() {
            return Ok(Ok(value));
        }
        let Decoded::Json(mut json) = value else {
            return Ok(Err(format!(
                "part {:?} is not JSON, so it has no [{}]",
                alt.part, alt.keys[0]
            )));
        };
        for key in &alt.keys {
            json = match json {
                Value::Array(mut items) => match list_index(key, items.len()) {
                    Some(i) => items.swap_remove(i),
                    None => return Ok(Err(format!("{}: no list index [{key}]", alt.part))),
                },
                Value::Object(mut map) => match map.shift_remove(key.as_str()) {
                    Some(v) => v,
                    None => return Ok(Err(format!("{}: no key [{key}]", alt.part))),
                },
                other => {
                    return Ok(Err(format!(
                        "{}: cannot index {} with [{key}]",
                        alt.part,
                        crate::decode::json_kind(&other)
                    )));
                }
            };
        }
        Ok(Ok(match json {
            Value::String(s) => Decoded::Text(s),
            other => Decoded::Json(other),
        }))
    }

    /// Takes the decoded part at `pos` (decoding it now if needed); the caller puts it back when
    /// it is shared.
    fn decoded_part(&mut self, pos: usize) -> Result<Option<Decoded>> {
        if let Some(value) = self.decoded[pos].take() {
            return Ok(Some(value));
        }
        let part = &self.raw.parts[pos];
        let value = match self.decoder {
            Some(decoder) => decoder
                .try_decode(&part.name, &part.data)
                .map_err(|e| Error::decode(self.at(part.offset), &part.name, e))?,
            None => Decoded::Bytes(part.data.clone()),
        };
        Ok(Some(value))
    }

    fn at(&self, offset: u64) -> SampleAt {
        SampleAt {
            dataset: self.raw.dataset.to_path_buf(),
            shard: self.raw.shard.to_string(),
            key: Some(self.raw.key.clone()),
            index: Some(self.raw.index),
            offset,
        }
    }

    fn mismatch(&mut self, field: &str, reason: String) -> Error {
        self.mismatched = true;
        self.field_error(field, reason)
    }

    fn field_error(&self, field: &str, reason: String) -> Error {
        let spec = self.field_map.get(field).map(|s| s.raw.clone()).unwrap_or_default();
        Error::Field {
            at: Box::new(self.at(self.raw.offset)),
            field: field.to_owned(),
            spec,
            reason,
        }
    }
}
