//! `field_map` values: which tar parts (and which keys inside decoded parts) fill a sample field.

use std::{collections::BTreeSet, sync::LazyLock};

use regex::Regex;

use crate::{
    Error, Result,
    yaml::pynum::{PyInt, py_int},
};

/// One alternative of a field spec: a part name plus `[key]` accessors into its decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldAccess {
    /// The tar part (extension) to read, e.g. `json`.
    pub part: String,
    /// Accessors applied in order: mapping keys, or list indices for lists (see [`list_index`]).
    pub keys: Vec<String>,
}

/// A parsed `field_map` value such as `jpg,png` or `json[items][0]`.
///
/// Alternatives are separated by `,` and tried in order; the first that succeeds fills the field
/// (Energon's `split_field_access`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpec {
    /// The text as written in `dataset.yaml`.
    pub raw: String,
    /// The alternatives, in order.
    pub alternatives: Vec<FieldAccess>,
}

static OPTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\A(?P<part>[^\[\]]+)(?P<access>(?:\[[^\[\]]+\])*)\n?\z")
        .expect("static field access pattern is valid")
});

impl FieldSpec {
    /// Parses a `field_map` value strictly: every alternative must be a part name optionally
    /// followed by `[key]` accessors. For user input (`--field-map`, the prepare prompt).
    pub fn parse(raw: &str) -> Result<Self> {
        if let Some(bad) = raw.split(',').find(|option| !OPTION_RE.is_match(option)) {
            return Err(Error::Config(format!(
                "invalid field spec {raw:?}: {bad:?} is not PART or PART[key][key]..."
            )));
        }
        Ok(Self::parse_lenient(raw))
    }

    /// Parses a `field_map` value as Energon does when it reads `dataset.yaml`: an alternative
    /// that is not `part[k1][k2]...` (say `a[b`) is replaced by the whole text taken as one part
    /// name, which then never matches a part.
    pub fn parse_lenient(raw: &str) -> Self {
        let alternatives = raw
            .split(',')
            .map(|option| match OPTION_RE.captures(option) {
                Some(caps) => {
                    let access = caps.name("access").map_or("", |m| m.as_str());
                    FieldAccess {
                        part: caps.name("part").map_or("", |m| m.as_str()).to_owned(),
                        keys: access
                            .split("][")
                            .map(|k| k.trim_start_matches('[').trim_end_matches(']'))
                            .filter(|k| !k.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    }
                }
                // COMPAT(energon 7.4): field_access.py:split_field_access uses the whole text.
                None => FieldAccess { part: raw.to_owned(), keys: Vec::new() },
            })
            .collect();
        FieldSpec { raw: raw.to_owned(), alternatives }
    }

    /// The part names this spec reads (the leading name of every alternative).
    pub fn part_names(&self) -> impl Iterator<Item = &str> {
        self.alternatives.iter().map(|a| a.part.as_str())
    }
}

/// A `field_map`: sample field name → spec, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldMap(pub Vec<(String, FieldSpec)>);

impl FieldMap {
    /// Builds a field map from `(field, spec text)` pairs (specs read as [`FieldSpec::parse_lenient`]).
    pub fn from_pairs<K: Into<String>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        FieldMap(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), FieldSpec::parse_lenient(v.as_ref())))
                .collect(),
        )
    }

    /// The implied part filter: every part name any alternative reads. Only these tar members are
    /// read and decoded.
    pub fn part_filter(&self) -> BTreeSet<String> {
        self.0.iter().flat_map(|(_, spec)| spec.part_names().map(str::to_owned)).collect()
    }

    /// The spec of `field`, if mapped.
    pub fn get(&self, field: &str) -> Option<&FieldSpec> {
        self.0.iter().find(|(f, _)| f == field).map(|(_, s)| s)
    }
}

/// Resolves an accessor against a list of length `len` as Energon does (`value[int(key)]`):
/// Python `int()` syntax (`" 1"`, `+1`, `1_0`), negative indices counting from the end. `None`
/// when the key is not an integer or out of range.
pub fn list_index(key: &str, len: usize) -> Option<usize> {
    let PyInt::Value(i) = py_int(key) else { return None };
    let len = i128::try_from(len).ok()?;
    let i = if i < 0 { i + len } else { i };
    if (0..len).contains(&i) { usize::try_from(i).ok() } else { None }
}
