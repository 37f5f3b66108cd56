//! PyYAML's implicit resolver: which type a plain scalar would be read back as.
//!
//! The emitter writes a string plain only when PyYAML's YAML 1.1 resolver would read it back as a
//! string; `yes`, `1.5`, `0x1F`, `2024-01-01`, `~` and friends therefore get quoted.

use std::sync::LazyLock;

use regex::Regex;

/// The type PyYAML's resolver assigns to a plain scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImplicitTag {
    Str,
    Bool,
    Int,
    Float,
    Null,
    /// `merge` (`<<`), `value` (`=`), `timestamp`, and the `!`/`&`/`*` placeholders.
    Other,
}

fn compile(pattern: &str) -> Regex {
    // Python's `$` also matches before a final newline.
    Regex::new(&format!(r"\A(?:{pattern})\n?\z")).expect("static resolver pattern is valid")
}

static BOOL: LazyLock<Regex> = LazyLock::new(|| {
    compile("yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF")
});
static FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    compile(concat!(
        r"[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?",
        r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?",
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
        r"|[-+]?\.(?:inf|Inf|INF)",
        r"|\.(?:nan|NaN|NAN)",
    ))
});
static INT: LazyLock<Regex> = LazyLock::new(|| {
    compile(concat!(
        r"[-+]?0b[0-1_]+",
        r"|[-+]?0[0-7_]+",
        r"|[-+]?(?:0|[1-9][0-9_]*)",
        r"|[-+]?0x[0-9a-fA-F_]+",
        r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+",
    ))
});
static NULL: LazyLock<Regex> = LazyLock::new(|| compile("~|null|Null|NULL|"));
static TIMESTAMP: LazyLock<Regex> = LazyLock::new(|| {
    compile(concat!(
        r"[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]",
        r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?",
        r"(?:[Tt]|[ \t]+)[0-9][0-9]?",
        r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?",
        r"(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?",
    ))
});

/// The tag PyYAML would resolve `text` to if it were written as a plain scalar.
pub(crate) fn resolve_plain(text: &str) -> ImplicitTag {
    // PyYAML only tries the resolvers registered for the first character, in registration order.
    let first = text.chars().next();
    let tries: &[ImplicitTag] = match first {
        None => &[ImplicitTag::Null],
        Some('y' | 'Y' | 't' | 'T' | 'f' | 'F' | 'o' | 'O') => &[ImplicitTag::Bool],
        Some('n' | 'N') => &[ImplicitTag::Bool, ImplicitTag::Null],
        Some('-' | '+') => &[ImplicitTag::Float, ImplicitTag::Int],
        Some('.') => &[ImplicitTag::Float],
        Some('0'..='9') => &[ImplicitTag::Float, ImplicitTag::Int, ImplicitTag::Other],
        Some('~') => &[ImplicitTag::Null],
        Some('<' | '=' | '!' | '&' | '*') => &[ImplicitTag::Other],
        Some(_) => &[],
    };
    for &tag in tries {
        let matched = match tag {
            ImplicitTag::Bool => BOOL.is_match(text),
            ImplicitTag::Float => FLOAT.is_match(text),
            ImplicitTag::Int => INT.is_match(text),
            ImplicitTag::Null => NULL.is_match(text),
            ImplicitTag::Other => match first {
                Some('<') => text.strip_suffix('\n').unwrap_or(text) == "<<",
                Some('=' | '!' | '&' | '*') => text.strip_suffix('\n').unwrap_or(text).len() == 1,
                _ => TIMESTAMP.is_match(text),
            },
            ImplicitTag::Str => false,
        };
        if matched {
            return tag;
        }
    }
    ImplicitTag::Str
}
