//! Loading YAML into a JSON value tree with Energon's scalar casting.

use std::path::Path;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span};
use serde_json::{Map, Number, Value};

use super::pynum::{PyInt, py_float, py_int};
use crate::{Error, Result};

/// Reads and parses a YAML file (see [`parse_yaml`]).
pub fn load_yaml(path: &Path) -> Result<Value> {
    let text = read_text(path)?;
    parse_yaml(&text, path)
}

/// Reads a metadata file that is YAML or JSON by its extension, as Energon's `load_yaml_json`
/// does: `*.yaml` through [`parse_yaml`], `*.json` through `serde_json`; any other name is an
/// error.
pub fn load_yaml_or_json(path: &Path) -> Result<Value> {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    if name.ends_with(".yaml") {
        load_yaml(path)
    } else if name.ends_with(".json") {
        let text = read_text(path)?;
        parse_json(&text, path)
    } else {
        Err(Error::BadMetadata {
            path: path.to_owned(),
            reason: "unsupported file extension (expected .yaml or .json)".to_owned(),
        })
    }
}

/// Parses JSON text into a value tree, naming `path` and the line/column in errors.
pub(crate) fn parse_json(text: &str, path: &Path) -> Result<Value> {
    serde_json::from_str(text).map_err(|e| Error::BadMetadata {
        path: path.to_owned(),
        reason: format!("invalid JSON at line {}, column {}: {e}", e.line(), e.column()),
    })
}

/// Reads a whole file as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let bytes = crate::storage::read(path).map_err(|e| Error::io("cannot read", path, e))?;
    String::from_utf8(bytes.to_vec()).map_err(|e| Error::BadMetadata {
        path: path.to_owned(),
        reason: format!("not valid UTF-8 at byte offset {}", e.utf8_error().valid_up_to()),
    })
}

/// Parses YAML text the way Energon's `eyaml.load_yaml` does and returns a JSON value tree.
///
/// - Mapping keys are always strings, taken verbatim (never cast).
/// - Quoted and block (`|`, `>`) scalars stay strings.
/// - Plain scalars are cast by [`cast_plain_scalar`].
/// - A repeated key keeps its first position and its last value (a Python `dict`).
/// - Tags are ignored (as rapidyaml's tree does); anchors are accepted and dropped.
///
/// Errors carry `path` and the 1-based line and column: malformed YAML, several documents, an
/// empty document, aliases, non-scalar mapping keys, and numbers a JSON value cannot hold.
pub fn parse_yaml(text: &str, path: &Path) -> Result<Value> {
    let mut builder = TreeBuilder { path, stack: Vec::new(), root: None, n_documents: 0 };
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| scan_error(path, &e))?;
        builder.on_event(event, span)?;
    }
    builder.root.ok_or_else(|| Error::BadYaml {
        path: path.to_owned(),
        line: 1,
        column: 1,
        reason: "empty document".to_owned(),
    })
}

/// Casts an unquoted YAML scalar the way Energon's `eyaml._cast_scalar` does.
///
/// In order: `null`/`~` (any case) → null; `true`/`yes` → true and `false`/`no` → false (any
/// case); text containing `.` or `e`/`E` that Python's `float()` accepts → float; text that
/// Python's `int()` accepts → integer; anything else stays a string. The empty scalar (`key:`)
/// becomes null.
///
/// Errors (as a reason string) when the number does not fit a JSON value: integers beyond the
/// 64-bit range, and floats that overflow to infinity or are NaN.
pub fn cast_plain_scalar(text: &str) -> Result<Value, String> {
    // COMPAT(energon 7.4): eyaml.py:_cast_scalar. The empty plain scalar is `None` in rapidyaml's
    // Python binding, which makes Energon fail; we read it as null, as other YAML loaders do.
    if text.is_empty() {
        return Ok(Value::Null);
    }
    let lower = text.to_lowercase();
    match lower.as_str() {
        "null" | "~" => return Ok(Value::Null),
        "true" | "yes" => return Ok(Value::Bool(true)),
        "false" | "no" => return Ok(Value::Bool(false)),
        _ => {}
    }
    if text.contains('.') || lower.contains('e') {
        if let Some(f) = py_float(text) {
            return Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| format!("float {text:?} is not finite"));
        }
        return Ok(Value::String(text.to_owned()));
    }
    match py_int(text) {
        PyInt::NotAnInt => Ok(Value::String(text.to_owned())),
        PyInt::TooLarge => Err(format!("integer {text:?} does not fit in 64 bits")),
        PyInt::Value(v) => {
            if let Ok(v) = i64::try_from(v) {
                Ok(Value::from(v))
            } else if let Ok(v) = u64::try_from(v) {
                Ok(Value::from(v))
            } else {
                Err(format!("integer {text:?} does not fit in 64 bits"))
            }
        }
    }
}

fn scan_error(path: &Path, e: &ScanError) -> Error {
    Error::BadYaml {
        path: path.to_owned(),
        line: e.marker().line(),
        column: e.marker().col() + 1,
        reason: e.info().to_owned(),
    }
}

/// A collection under construction.
enum Frame {
    Seq(Vec<Value>),
    Map {
        map: Map<String, Value>,
        /// The key read, waiting for its value.
        key: Option<String>,
    },
}

/// Turns parser events into a value tree.
struct TreeBuilder<'a> {
    path: &'a Path,
    stack: Vec<Frame>,
    root: Option<Value>,
    n_documents: usize,
}

impl TreeBuilder<'_> {
    fn error(&self, span: Span, reason: impl Into<String>) -> Error {
        Error::BadYaml {
            path: self.path.to_owned(),
            line: span.start.line(),
            column: span.start.col() + 1,
            reason: reason.into(),
        }
    }

    /// Whether the next node is a mapping key.
    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn on_event(&mut self, event: Event<'_>, span: Span) -> Result<()> {
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                self.n_documents += 1;
                if self.n_documents > 1 {
                    return Err(self.error(span, "more than one YAML document"));
                }
            }
            Event::Alias(_) => return Err(self.error(span, "aliases (*name) are not supported")),
            Event::Scalar(text, style, _anchor, _tag) => {
                if self.expects_key() {
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some(text.into_owned());
                    }
                    return Ok(());
                }
                let value = if style == ScalarStyle::Plain {
                    cast_plain_scalar(&text).map_err(|reason| self.error(span, reason))?
                } else {
                    Value::String(text.into_owned())
                };
                self.push(value);
            }
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if self.expects_key() {
                    return Err(self.error(span, "mapping keys must be scalars"));
                }
                self.stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map { map: Map::new(), key: None }
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.stack.pop() {
                    Some(Frame::Seq(items)) => Value::Array(items),
                    Some(Frame::Map { map, .. }) => Value::Object(map),
                    None => return Err(self.error(span, "unbalanced collection end")),
                };
                self.push(value);
            }
        }
        Ok(())
    }

    /// Attaches a finished node to its parent (or makes it the document root).
    fn push(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map { map, key }) => {
                if let Some(key) = key.take() {
                    // A Python dict keeps a repeated key at its first position with the last value;
                    // so does `serde_json::Map` (an `IndexMap` under `preserve_order`).
                    map.insert(key, value);
                }
            }
        }
    }
}
