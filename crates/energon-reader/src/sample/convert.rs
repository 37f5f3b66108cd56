//! Conversions between decoded part values and the typed fields of samples.

use serde_json::Value;

use crate::decode::{Decoded, Tensor, Video};

/// A typed field that a field map can fill from a decoded value.
pub trait FromDecoded: Sized {
    /// Converts, or says what was expected and what was found.
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch>;
}

/// A decoded value of another kind than a typed field takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected}, found {found}")]
pub struct Mismatch {
    /// What the field takes (`a string`, `a list of integers`, ...).
    pub expected: &'static str,
    /// What the value is (`json object`, `an item 3.5`, ...).
    pub found: String,
}

impl Mismatch {
    fn of(expected: &'static str, found: &Decoded) -> Self {
        Mismatch { expected, found: what(found) }
    }
}

/// A borrowed view of a field value, for generic consumers (preview, Python bindings).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FieldValue<'a> {
    /// An optional field left empty (`None`).
    None,
    /// A tensor (an image or an array).
    Tensor(&'a Tensor),
    /// A string.
    Text(&'a str),
    /// An integer.
    Int(i64),
    /// A list of strings.
    Texts(&'a [String]),
    /// A list of integers.
    Ints(&'a [i64]),
    /// A list of tensors.
    Tensors(&'a [Tensor]),
    /// A video.
    Video(&'a Video),
    /// Any decoded value.
    Decoded(&'a Decoded),
    /// A list of decoded values.
    List(&'a [Decoded]),
}

/// Borrowing a typed field as a [`FieldValue`].
pub trait IntoFieldValue {
    /// The view.
    fn view(&self) -> FieldValue<'_>;
}

impl IntoFieldValue for Tensor {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Tensor(self)
    }
}

impl IntoFieldValue for String {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Text(self)
    }
}

impl IntoFieldValue for i64 {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Int(*self)
    }
}

impl IntoFieldValue for Vec<String> {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Texts(self)
    }
}

impl IntoFieldValue for Vec<i64> {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Ints(self)
    }
}

impl IntoFieldValue for Vec<Tensor> {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Tensors(self)
    }
}

impl IntoFieldValue for Video {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Video(self)
    }
}

impl IntoFieldValue for Decoded {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::Decoded(self)
    }
}

impl IntoFieldValue for Vec<Decoded> {
    fn view(&self) -> FieldValue<'_> {
        FieldValue::List(self)
    }
}

impl<T: IntoFieldValue> IntoFieldValue for Option<T> {
    fn view(&self) -> FieldValue<'_> {
        self.as_ref().map_or(FieldValue::None, IntoFieldValue::view)
    }
}

/// An owned field value, for consumers that take a sample apart (the Python bindings hand the
/// buffers over to numpy without copying them).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Field {
    /// An optional field left empty (`None`).
    None,
    /// A tensor (an image or an array).
    Tensor(Tensor),
    /// A string.
    Text(String),
    /// An integer.
    Int(i64),
    /// A list of strings.
    Texts(Vec<String>),
    /// A list of integers.
    Ints(Vec<i64>),
    /// A list of tensors.
    Tensors(Vec<Tensor>),
    /// A video.
    Video(Video),
    /// Any decoded value.
    Decoded(Decoded),
    /// A list of decoded values.
    List(Vec<Decoded>),
}

/// Turning a typed field into a [`Field`].
pub trait IntoField {
    /// The owned value.
    fn into_field(self) -> Field;
}

macro_rules! into_field {
    ($($ty:ty => $variant:ident),* $(,)?) => {
        $(impl IntoField for $ty {
            fn into_field(self) -> Field {
                Field::$variant(self)
            }
        })*
    };
}

into_field!(
    Tensor => Tensor,
    String => Text,
    i64 => Int,
    Vec<String> => Texts,
    Vec<i64> => Ints,
    Vec<Tensor> => Tensors,
    Video => Video,
    Decoded => Decoded,
    Vec<Decoded> => List,
);

impl<T: IntoField> IntoField for Option<T> {
    fn into_field(self) -> Field {
        self.map_or(Field::None, IntoField::into_field)
    }
}

fn what(value: &Decoded) -> String {
    match value {
        Decoded::Json(v) => format!("json {}", crate::decode::json_kind(v)),
        other => other.summary(),
    }
}

impl FromDecoded for Tensor {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Image(t) | Decoded::Tensor(t) => Ok(t),
            other => Err(Mismatch::of("an image or array", &other)),
        }
    }
}

impl FromDecoded for String {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Text(s) | Decoded::Json(Value::String(s)) => Ok(s),
            other => Err(Mismatch::of("a string", &other)),
        }
    }
}

impl FromDecoded for i64 {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Int(i) => Ok(i),
            Decoded::Json(Value::Number(n)) if n.as_i64().is_some() => {
                Ok(n.as_i64().expect("checked"))
            }
            other => Err(Mismatch::of("an integer", &other)),
        }
    }
}

impl FromDecoded for Vec<String> {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Json(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(s) => Ok(s),
                    other => Err(Mismatch {
                        expected: "a list of strings",
                        found: format!("an item {other}"),
                    }),
                })
                .collect(),
            other => Err(Mismatch::of("a list of strings", &other)),
        }
    }
}

impl FromDecoded for Vec<i64> {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Json(Value::Array(items)) => items
                .into_iter()
                .map(|item| {
                    item.as_i64().ok_or_else(|| Mismatch {
                        expected: "a list of integers",
                        found: format!("an item {item}"),
                    })
                })
                .collect(),
            other => Err(Mismatch::of("a list of integers", &other)),
        }
    }
}

impl FromDecoded for Vec<Tensor> {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Image(t) | Decoded::Tensor(t) => Ok(vec![t]),
            other => Err(Mismatch::of("images or arrays", &other)),
        }
    }
}

impl FromDecoded for Video {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Video(v) => Ok(v),
            other => Err(Mismatch::of("a video", &other)),
        }
    }
}

impl FromDecoded for Decoded {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        Ok(value)
    }
}

impl FromDecoded for Vec<Decoded> {
    fn from_decoded(value: Decoded) -> Result<Self, Mismatch> {
        match value {
            Decoded::Json(Value::Array(items)) => Ok(items
                .into_iter()
                .map(|item| match item {
                    Value::String(s) => Decoded::Text(s),
                    other => Decoded::Json(other),
                })
                .collect()),
            other => Err(Mismatch::of("a list", &other)),
        }
    }
}
