//! A YAML writer whose output is byte-identical to PyYAML's `yaml.dump` for JSON-like data.
//!
//! Energon's `prepare` writes `split.yaml`, `dataset.yaml` and the legacy `.info.yaml` with
//! `yaml.dump` (default settings: block style, indent 2, width 80, `allow_unicode=False`).
//! This module reproduces that emitter's decisions for mappings with string keys, sequences,
//! strings, integers, floats, booleans and null: which scalar style (plain, single- or
//! double-quoted) a string gets, where long scalars fold, indentless sequences under mapping
//! keys, `[]`/`{}` for empty collections, and `? ` complex keys for long or multi-line keys.

use serde_json::Value;

use super::pynum::py_float_repr;
use super::resolve::{ImplicitTag, resolve_plain};

/// Options of [`dump_yaml`]: `DumpOptions::default().sort_keys(true)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DumpOptions {
    /// Sort mapping keys (PyYAML's default `sort_keys=True`); `false` keeps insertion order, as
    /// Energon's `yaml.dump(..., sort_keys=False)` calls do.
    pub sort_keys: bool,
}

impl DumpOptions {
    /// Whether mapping keys are sorted.
    pub fn sort_keys(mut self, sort_keys: bool) -> Self {
        self.sort_keys = sort_keys;
        self
    }
}

/// Serializes `value` exactly as PyYAML's `yaml.dump(value, sort_keys=...)` would.
pub fn dump_yaml(value: &Value, options: DumpOptions) -> String {
    let mut emitter = Emitter {
        out: String::new(),
        options,
        column: 0,
        indent: None,
        indents: Vec::new(),
        whitespace: true,
        indention: true,
        flow_level: 0,
        open_ended: false,
    };
    emitter.document(value);
    emitter.out
}

/// PyYAML's `best_indent`.
const INDENT: usize = 2;
/// PyYAML's `best_width`.
const WIDTH: usize = 80;
/// Keys this long (in characters) or longer are written as `? key` complex keys.
const MAX_SIMPLE_KEY: usize = 128;

/// Where a node sits (PyYAML's `*_context` flags).
#[derive(Debug, Clone, Copy, Default)]
struct Context {
    root: bool,
    mapping: bool,
    simple_key: bool,
}

/// Line-break characters that PyYAML treats as breaks inside scalars.
fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Whitespace for PyYAML's "preceded/followed by whitespace" checks.
fn is_blank_or_break(c: char) -> bool {
    matches!(c, '\0' | ' ' | '\t' | '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// What PyYAML's `analyze_scalar` finds out about a string (with `allow_unicode=False`).
#[derive(Debug, Clone, Copy)]
struct Analysis {
    empty: bool,
    multiline: bool,
    allow_flow_plain: bool,
    allow_block_plain: bool,
    allow_single_quoted: bool,
}

fn analyze(text: &[char]) -> Analysis {
    if text.is_empty() {
        return Analysis {
            empty: true,
            multiline: false,
            allow_flow_plain: false,
            allow_block_plain: true,
            allow_single_quoted: true,
        };
    }
    let starts_with = |p: &str| text.iter().copied().take(p.len()).eq(p.chars());
    let mut block_indicators = starts_with("---") || starts_with("...");
    let mut flow_indicators = block_indicators;
    let mut line_breaks = false;
    let mut special_characters = false;
    let (mut leading_space, mut leading_break) = (false, false);
    let (mut trailing_space, mut trailing_break) = (false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut previous_space, mut previous_break) = (false, false);
    let mut preceded_by_whitespace = true;
    let last = text.len() - 1;
    for (i, &c) in text.iter().enumerate() {
        let followed_by_whitespace = text.get(i + 1).is_none_or(|&n| is_blank_or_break(n));
        if i == 0 {
            if "#,[]{}&*!|>'\"%@`".contains(c) {
                flow_indicators = true;
                block_indicators = true;
            }
            if c == '?' || c == ':' {
                flow_indicators = true;
                block_indicators |= followed_by_whitespace;
            }
            if c == '-' && followed_by_whitespace {
                flow_indicators = true;
                block_indicators = true;
            }
        } else {
            if ",?[]{}".contains(c) {
                flow_indicators = true;
            }
            if c == ':' {
                flow_indicators = true;
                block_indicators |= followed_by_whitespace;
            }
            if c == '#' && preceded_by_whitespace {
                flow_indicators = true;
                block_indicators = true;
            }
        }
        if is_break(c) {
            line_breaks = true;
        }
        // With allow_unicode=False everything outside printable ASCII (bar '\n') is special.
        if !(c == '\n' || (' '..='~').contains(&c)) {
            special_characters = true;
        }
        if c == ' ' {
            leading_space |= i == 0;
            trailing_space |= i == last;
            break_space |= previous_break;
            previous_space = true;
            previous_break = false;
        } else if is_break(c) {
            leading_break |= i == 0;
            trailing_break |= i == last;
            space_break |= previous_space;
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blank_or_break(c);
    }
    let mut allow_flow_plain = true;
    let mut allow_block_plain = true;
    let mut allow_single_quoted = true;
    if leading_space || leading_break || trailing_space || trailing_break {
        allow_flow_plain = false;
        allow_block_plain = false;
    }
    if break_space {
        allow_flow_plain = false;
        allow_block_plain = false;
        allow_single_quoted = false;
    }
    if space_break || special_characters {
        allow_flow_plain = false;
        allow_block_plain = false;
        allow_single_quoted = false;
    }
    if line_breaks {
        allow_flow_plain = false;
        allow_block_plain = false;
    }
    if flow_indicators {
        allow_flow_plain = false;
    }
    if block_indicators {
        allow_block_plain = false;
    }
    Analysis {
        empty: false,
        multiline: line_breaks,
        allow_flow_plain,
        allow_block_plain,
        allow_single_quoted,
    }
}

/// The three scalar styles PyYAML picks from for untagged data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Single,
    Double,
}

/// Emitter state, named after PyYAML's.
struct Emitter {
    out: String,
    options: DumpOptions,
    column: usize,
    indent: Option<usize>,
    indents: Vec<Option<usize>>,
    whitespace: bool,
    indention: bool,
    flow_level: usize,
    open_ended: bool,
}

impl Emitter {
    fn document(&mut self, value: &Value) {
        // The document start stays implicit: PyYAML's empty-document check never fires for dumped
        // data, whose scalars always carry a tag.
        self.node(value, Context { root: true, ..Context::default() });
        self.write_indent();
        if self.open_ended {
            self.write_indicator("...", true, false, false);
            self.write_indent();
        }
    }

    fn node(&mut self, value: &Value, ctx: Context) {
        match value {
            Value::Array(items) => {
                if self.flow_level > 0 || items.is_empty() {
                    self.flow_sequence(items);
                } else {
                    self.block_sequence(items, ctx);
                }
            }
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                if self.options.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                if self.flow_level > 0 || entries.is_empty() {
                    self.flow_mapping(&entries);
                } else {
                    self.block_mapping(&entries);
                }
            }
            scalar => self.scalar(scalar, ctx),
        }
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        self.indent = match self.indent {
            None => Some(if flow { INDENT } else { 0 }),
            Some(i) if !indentless => Some(i + INDENT),
            Some(i) => Some(i),
        };
    }

    fn pop_indent(&mut self) {
        self.indent = self.indents.pop().flatten();
    }

    fn flow_sequence(&mut self, items: &[Value]) {
        self.write_indicator("[", true, true, false);
        self.flow_level += 1;
        self.increase_indent(true, false);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.write_indicator(",", false, false, false);
            }
            if self.column > WIDTH {
                self.write_indent();
            }
            self.node(item, Context::default());
        }
        self.pop_indent();
        self.flow_level -= 1;
        self.write_indicator("]", false, false, false);
    }

    fn flow_mapping(&mut self, entries: &[(&String, &Value)]) {
        self.write_indicator("{", true, true, false);
        self.flow_level += 1;
        self.increase_indent(true, false);
        for (i, (key, value)) in entries.iter().enumerate() {
            if i > 0 {
                self.write_indicator(",", false, false, false);
            }
            if self.column > WIDTH {
                self.write_indent();
            }
            let key_value = Value::String((*key).clone());
            if is_simple_key(key) {
                self.node(
                    &key_value,
                    Context { mapping: true, simple_key: true, ..Context::default() },
                );
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, false);
                self.node(&key_value, Context { mapping: true, ..Context::default() });
                if self.column > WIDTH {
                    self.write_indent();
                }
                self.write_indicator(":", true, false, false);
            }
            self.node(value, Context { mapping: true, ..Context::default() });
        }
        self.pop_indent();
        self.flow_level -= 1;
        self.write_indicator("}", false, false, false);
    }

    fn block_sequence(&mut self, items: &[Value], ctx: Context) {
        let indentless = ctx.mapping && !self.indention;
        self.increase_indent(false, indentless);
        for item in items {
            self.write_indent();
            self.write_indicator("-", true, false, true);
            self.node(item, Context::default());
        }
        self.pop_indent();
    }

    fn block_mapping(&mut self, entries: &[(&String, &Value)]) {
        self.increase_indent(false, false);
        for (key, value) in entries {
            self.write_indent();
            let key_value = Value::String((*key).clone());
            if is_simple_key(key) {
                self.node(
                    &key_value,
                    Context { mapping: true, simple_key: true, ..Context::default() },
                );
                self.write_indicator(":", false, false, false);
            } else {
                self.write_indicator("?", true, false, true);
                self.node(&key_value, Context { mapping: true, ..Context::default() });
                self.write_indent();
                self.write_indicator(":", true, false, true);
            }
            self.node(value, Context { mapping: true, ..Context::default() });
        }
        self.pop_indent();
    }

    fn scalar(&mut self, value: &Value, ctx: Context) {
        let (text, tag) = represent(value);
        let chars: Vec<char> = text.chars().collect();
        let analysis = analyze(&chars);
        // `implicit[0]`: written plain, the text reads back as the same type.
        let plain_implicit = resolve_plain(&text) == tag;
        let style = choose_style(&analysis, plain_implicit, ctx.simple_key, self.flow_level);
        self.increase_indent(true, false);
        let split = !ctx.simple_key;
        match style {
            Style::Plain => self.write_plain(&chars, split, ctx.root),
            Style::Single => self.write_single_quoted(&chars, split),
            Style::Double => self.write_double_quoted(&chars, split),
        }
        self.pop_indent();
    }

    fn write_raw(&mut self, data: &str) {
        self.column += data.chars().count();
        self.out.push_str(data);
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        whitespace: bool,
        indention: bool,
    ) {
        if !self.whitespace && need_whitespace {
            self.write_raw(" ");
        }
        self.write_raw(indicator);
        self.whitespace = whitespace;
        self.indention = self.indention && indention;
        self.open_ended = false;
    }

    fn write_indent(&mut self) {
        let indent = self.indent.unwrap_or(0);
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.write_line_break(None);
        }
        if self.column < indent {
            self.whitespace = true;
            let pad = " ".repeat(indent - self.column);
            self.write_raw(&pad);
        }
    }

    fn write_line_break(&mut self, data: Option<char>) {
        self.out.push(data.unwrap_or('\n'));
        self.whitespace = true;
        self.indention = true;
        self.column = 0;
    }

    /// Writes a run of line breaks the way the plain and single-quoted writers do.
    fn write_breaks(&mut self, breaks: &[char]) {
        if breaks.first() == Some(&'\n') {
            self.write_line_break(None);
        }
        for &br in breaks {
            self.write_line_break(Some(br));
        }
        self.write_indent();
    }

    fn write_plain(&mut self, text: &[char], split: bool, root: bool) {
        if root {
            self.open_ended = true;
        }
        if text.is_empty() {
            return;
        }
        if !self.whitespace {
            self.write_raw(" ");
        }
        self.whitespace = false;
        self.indention = false;
        let (mut spaces, mut breaks) = (false, false);
        let mut start = 0;
        for end in 0..=text.len() {
            let ch = text.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end && self.column > WIDTH && split {
                        self.write_indent();
                        self.whitespace = false;
                        self.indention = false;
                    } else {
                        self.write_raw(&text[start..end].iter().collect::<String>());
                    }
                    start = end;
                }
            } else if breaks {
                if !ch.is_some_and(is_break) {
                    self.write_breaks(&text[start..end]);
                    self.whitespace = false;
                    self.indention = false;
                    start = end;
                }
            } else if ch.is_none_or(|c| c == ' ' || is_break(c)) {
                self.write_raw(&text[start..end].iter().collect::<String>());
                start = end;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
                breaks = is_break(c);
            }
        }
    }

    fn write_single_quoted(&mut self, text: &[char], split: bool) {
        self.write_indicator("'", true, false, false);
        let (mut spaces, mut breaks) = (false, false);
        let mut start = 0;
        for end in 0..=text.len() {
            let ch = text.get(end).copied();
            if spaces {
                if ch != Some(' ') {
                    if start + 1 == end
                        && self.column > WIDTH
                        && split
                        && start != 0
                        && end != text.len()
                    {
                        self.write_indent();
                    } else {
                        self.write_raw(&text[start..end].iter().collect::<String>());
                    }
                    start = end;
                }
            } else if breaks {
                if !ch.is_some_and(is_break) {
                    self.write_breaks(&text[start..end]);
                    start = end;
                }
            } else if ch.is_none_or(|c| c == ' ' || c == '\'' || is_break(c)) && start < end {
                self.write_raw(&text[start..end].iter().collect::<String>());
                start = end;
            }
            if ch == Some('\'') {
                self.write_raw("''");
                start = end + 1;
            }
            if let Some(c) = ch {
                spaces = c == ' ';
                breaks = is_break(c);
            }
        }
        self.write_indicator("'", false, false, false);
    }

    fn write_double_quoted(&mut self, text: &[char], split: bool) {
        self.write_indicator("\"", true, false, false);
        let mut start = 0;
        for end in 0..=text.len() {
            let ch = text.get(end).copied();
            let needs_escape = ch.is_none_or(|c| {
                matches!(c, '"' | '\\' | '\u{85}' | '\u{2028}' | '\u{2029}' | '\u{feff}')
                    || !(' '..='~').contains(&c)
            });
            if needs_escape {
                if start < end {
                    self.write_raw(&text[start..end].iter().collect::<String>());
                    start = end;
                }
                if let Some(c) = ch {
                    self.write_raw(&escape(c));
                    start = end + 1;
                }
            }
            // `end - start` is -1 right after an escape; PyYAML compares in signed arithmetic.
            let pending = end as isize - start as isize;
            if 0 < end
                && end + 1 < text.len()
                && (ch == Some(' ') || start >= end)
                && self.column as isize + pending > WIDTH as isize
                && split
            {
                let mut data: String = text[start.min(end)..end].iter().collect();
                data.push('\\');
                if start < end {
                    start = end;
                }
                self.write_raw(&data);
                self.write_indent();
                self.whitespace = false;
                self.indention = false;
                if text.get(start) == Some(&' ') {
                    self.write_raw("\\");
                }
            }
        }
        self.write_indicator("\"", false, false, false);
    }
}

/// PyYAML's double-quoted escape for one character.
fn escape(c: char) -> String {
    let short = match c {
        '\0' => Some('0'),
        '\x07' => Some('a'),
        '\x08' => Some('b'),
        '\t' => Some('t'),
        '\n' => Some('n'),
        '\x0b' => Some('v'),
        '\x0c' => Some('f'),
        '\r' => Some('r'),
        '\x1b' => Some('e'),
        '"' => Some('"'),
        '\\' => Some('\\'),
        '\u{85}' => Some('N'),
        '\u{a0}' => Some('_'),
        '\u{2028}' => Some('L'),
        '\u{2029}' => Some('P'),
        _ => None,
    };
    let code = u32::from(c);
    match short {
        Some(s) => format!("\\{s}"),
        None if code <= 0xff => format!("\\x{code:02X}"),
        None if code <= 0xffff => format!("\\u{code:04X}"),
        None => format!("\\U{code:08X}"),
    }
}

/// PyYAML's `check_simple_key` for a string key.
fn is_simple_key(key: &str) -> bool {
    let n_chars = key.chars().count();
    n_chars > 0 && n_chars < MAX_SIMPLE_KEY && !key.chars().any(is_break)
}

/// PyYAML's `choose_scalar_style` for untagged data (no requested style, not canonical).
fn choose_style(
    analysis: &Analysis,
    plain_implicit: bool,
    simple_key: bool,
    flow_level: usize,
) -> Style {
    if plain_implicit
        && !(simple_key && (analysis.empty || analysis.multiline))
        && ((flow_level > 0 && analysis.allow_flow_plain)
            || (flow_level == 0 && analysis.allow_block_plain))
    {
        return Style::Plain;
    }
    if analysis.allow_single_quoted && !(simple_key && analysis.multiline) {
        return Style::Single;
    }
    Style::Double
}

/// PyYAML's representer: the scalar text and the tag it carries.
fn represent(value: &Value) -> (String, ImplicitTag) {
    match value {
        Value::Null => ("null".to_owned(), ImplicitTag::Null),
        Value::Bool(b) => ((if *b { "true" } else { "false" }).to_owned(), ImplicitTag::Bool),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                (i.to_string(), ImplicitTag::Int)
            } else if let Some(u) = n.as_u64() {
                (u.to_string(), ImplicitTag::Int)
            } else {
                (represent_float(n.as_f64().unwrap_or(f64::NAN)), ImplicitTag::Float)
            }
        }
        Value::String(s) => (s.clone(), ImplicitTag::Str),
        Value::Array(_) | Value::Object(_) => unreachable!("collections are not scalars"),
    }
}

/// PyYAML's `represent_float`.
fn represent_float(f: f64) -> String {
    if f.is_nan() {
        return ".nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf".to_owned() } else { "-.inf".to_owned() };
    }
    let text = py_float_repr(f).to_lowercase();
    if !text.contains('.') && text.contains('e') { text.replacen('e', ".0e", 1) } else { text }
}
