//! Brace expansion (Python `braceexpand` 0.1.7) and order-preserving brace collapse (Energon's
//! `bracecollapse.collapse(keep_order=True)`).

use crate::{Error, Result};

/// Expansions larger than this are refused instead of exhausting memory.
const MAX_EXPANSION: usize = 1 << 24;

/// Expands `pattern` the way Python's `braceexpand.braceexpand(pattern)` does.
///
/// - `{a,b}` alternatives (the empty alternative counts: `x{,y}` → `x`, `xy`), nested freely;
/// - `{1..3}` integer ranges, `{3..1}` descending, `{-1..2}` negative, optional `..step`
///   (its sign is ignored, 0 means 1); a leading zero on either end (`{07..10}`) pads every number
///   to the width of the longer end, minus signs included;
/// - `{a..e}` letter ranges over `A..=Z` followed by `a..=z` (so `{Z..a}` is `Z`, `a`);
/// - a brace group that is neither (`{x}`, `{}`) stays literal, its inside still expanded;
/// - a backslash escapes the next character and is removed;
/// - unbalanced braces are an error ([`Error::BadPattern`]).
///
/// Results come in the same order as Python's (the leftmost group varies slowest).
pub fn brace_expand(pattern: &str) -> Result<Vec<String>> {
    let bad =
        |reason: &str| Error::BadPattern { pattern: pattern.to_owned(), reason: reason.to_owned() };
    let expanded = expand_pattern(pattern).map_err(|e| match e {
        ExpandError::Unbalanced => bad("unbalanced braces"),
        ExpandError::TooLarge => bad("expands to too many names"),
    })?;
    Ok(expanded.into_iter().map(|s| unescape(&s)).collect())
}

/// Why an expansion failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpandError {
    Unbalanced,
    TooLarge,
}

/// Removes backslash escapes (`\x` → `x`); like Python's `re.sub(r'\\(.)', ...)`, a backslash
/// before a newline or at the end stays.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some(&next) if next != '\n' => {
                    out.push(next);
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Expands a pattern into the cartesian product of its literal runs and brace groups (escapes
/// still in place).
fn expand_pattern(pattern: &str) -> Result<Vec<String>, ExpandError> {
    let bytes = pattern.as_bytes();
    let mut items: Vec<Vec<String>> = Vec::new();
    let (mut start, mut pos, mut depth) = (0usize, 0usize, 0i64);
    while pos < bytes.len() {
        match bytes[pos] {
            b'\\' => {
                pos += 2;
                continue;
            }
            b'{' => {
                if depth == 0 && pos > start {
                    items.push(vec![pattern[start..pos].to_owned()]);
                    start = pos;
                }
                depth += 1;
            }
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    let expr = &pattern[start + 1..pos];
                    match expand_expression(expr)? {
                        Some(alternatives) => items.push(alternatives),
                        None => {
                            items.push(vec!["{".to_owned()]);
                            items.push(expand_pattern(expr)?);
                            items.push(vec!["}".to_owned()]);
                        }
                    }
                    start = pos + 1;
                }
            }
            _ => {}
        }
        pos += 1;
    }
    if depth != 0 {
        return Err(ExpandError::Unbalanced);
    }
    if start < bytes.len() {
        items.push(vec![pattern[start..].to_owned()]);
    }
    product(&items)
}

/// The cartesian product of `items`, first item varying slowest.
fn product(items: &[Vec<String>]) -> Result<Vec<String>, ExpandError> {
    let mut res = vec![String::new()];
    for alternatives in items {
        let n = res.len().checked_mul(alternatives.len()).ok_or(ExpandError::TooLarge)?;
        if n > MAX_EXPANSION {
            return Err(ExpandError::TooLarge);
        }
        let mut next = Vec::with_capacity(n);
        for prefix in &res {
            for alt in alternatives {
                next.push(format!("{prefix}{alt}"));
            }
        }
        res = next;
    }
    Ok(res)
}

/// Expands the inside of a brace group: a range, a comma sequence, or `None` for neither.
fn expand_expression(expr: &str) -> Result<Option<Vec<String>>, ExpandError> {
    // Python's `$` also matches before a final newline.
    let body = expr.strip_suffix('\n').unwrap_or(expr);
    if let Some(range) = parse_range(body) {
        return match range {
            Range::Int { left, right, step } => int_range(left, right, step).map(Some),
            Range::Char { left, right, step } => Ok(Some(char_range(left, right, step))),
        };
    }
    expand_sequence(expr)
}

/// A parsed `{a..b[..step]}` range.
enum Range<'a> {
    Int { left: &'a str, right: &'a str, step: &'a str },
    Char { left: char, right: char, step: &'a str },
}

/// Matches `-?\d+..-?\d+(..-?\d+)?` or `[A-Za-z]..[A-Za-z](..-?\d+)?` (ASCII digits).
fn parse_range(body: &str) -> Option<Range<'_>> {
    let mut parts = body.split("..");
    let left = parts.next()?;
    let right = parts.next()?;
    let step = match parts.next() {
        None => "",
        Some(s) => {
            let digits = s.strip_prefix('-').unwrap_or(s);
            if !is_digits(digits) {
                return None;
            }
            digits
        }
    };
    if parts.next().is_some() {
        return None;
    }
    let is_int = |s: &str| is_digits(s.strip_prefix('-').unwrap_or(s));
    if is_int(left) && is_int(right) {
        return Some(Range::Int { left, right, step });
    }
    let letter = |s: &str| {
        let mut chars = s.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c),
            _ => None,
        }
    };
    Some(Range::Char { left: letter(left)?, right: letter(right)?, step })
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// The step of a range: absent or zero means 1.
fn parse_step(step: &str) -> Option<u128> {
    if step.is_empty() {
        return Some(1);
    }
    let v: u128 = step.parse().ok()?;
    Some(v.max(1))
}

fn int_range(left: &str, right: &str, step: &str) -> Result<Vec<String>, ExpandError> {
    let padded = [left, right]
        .iter()
        .any(|s| *s != "0" && *s != "-0" && (s.starts_with('0') || s.starts_with("-0")));
    let width = if padded { left.len().max(right.len()) } else { 0 };
    let (Ok(start), Ok(end), Some(step)) =
        (left.parse::<i128>(), right.parse::<i128>(), parse_step(step))
    else {
        return Err(ExpandError::TooLarge);
    };
    let span = start.abs_diff(end);
    if span / step >= MAX_EXPANSION as u128 {
        return Err(ExpandError::TooLarge);
    }
    let n = usize::try_from(span / step).map_err(|_| ExpandError::TooLarge)? + 1;
    let step = i128::try_from(step).map_err(|_| ExpandError::TooLarge)?;
    let step = if start <= end { step } else { -step };
    Ok((0..n)
        .map(|k| {
            let i = start + step * k as i128;
            // Python's '%0Nd': the width counts the minus sign.
            if i < 0 {
                format!("-{:0>w$}", -i, w = width.saturating_sub(1))
            } else {
                format!("{i:0>width$}")
            }
        })
        .collect())
}

/// The letters of `braceexpand`'s alphabet: `A..=Z` then `a..=z`.
fn alphabet_index(c: char) -> usize {
    if c.is_ascii_uppercase() {
        (c as usize) - ('A' as usize)
    } else {
        26 + (c as usize) - ('a' as usize)
    }
}

fn alphabet_char(i: usize) -> char {
    let i = u8::try_from(i).expect("alphabet index is below 52");
    char::from(if i < 26 { b'A' + i } else { b'a' + i - 26 })
}

fn char_range(left: char, right: char, step: &str) -> Vec<String> {
    let step = parse_step(step).and_then(|s| usize::try_from(s).ok()).unwrap_or(usize::MAX);
    let (start, end) = (alphabet_index(left), alphabet_index(right));
    let indices: Vec<usize> = if start <= end {
        (start..=end).step_by(step).collect()
    } else {
        (end..=start).rev().step_by(step).collect()
    };
    indices.into_iter().map(|i| alphabet_char(i).to_string()).collect()
}

/// Expands a comma sequence (`a,b{c,d},`) or returns `None` when there is no top-level comma.
fn expand_sequence(seq: &str) -> Result<Option<Vec<String>>, ExpandError> {
    let bytes = seq.as_bytes();
    let mut pieces: Vec<&str> = Vec::new();
    let (mut start, mut pos, mut depth) = (0usize, 0usize, 0i64);
    while pos < bytes.len() {
        match bytes[pos] {
            b'\\' => {
                pos += 2;
                continue;
            }
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b',' if depth == 0 => {
                pieces.push(&seq[start..pos]);
                start = pos + 1;
            }
            _ => {}
        }
        pos += 1;
    }
    if depth != 0 {
        return Err(ExpandError::Unbalanced);
    }
    if pieces.is_empty() {
        return Ok(None);
    }
    pieces.push(&seq[start..]);
    let mut res = Vec::new();
    for piece in pieces {
        res.extend(expand_pattern(piece)?);
        if res.len() > MAX_EXPANSION {
            return Err(ExpandError::TooLarge);
        }
    }
    Ok(Some(res))
}

/// Compresses a list of names into brace patterns, keeping their order, exactly like Energon's
/// `bracecollapse.collapse(names, keep_order=True)`.
///
/// Each name is split into literal text and runs of ASCII digits. Walking the list, a run of two
/// or more consecutive names with identical literals whose numbers differ in exactly one field,
/// which increases by exactly 1 from name to name with an unchanged digit count, becomes
/// `prefix{first..last}suffix`; every other name is kept as is. Expanding the result with
/// [`brace_expand`] gives back the input (for names without `{`, `}`, `,` or `\`).
pub fn collapse(names: &[String]) -> Vec<String> {
    let tokens: Vec<Tokens<'_>> = names.iter().map(|n| Tokens::new(n)).collect();
    let mut res = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let first = &tokens[i];
        if first.nums.is_empty() {
            res.push(names[i].clone());
            i += 1;
            continue;
        }
        let mut var_idx: Option<usize> = None;
        let mut prev = first;
        let mut run_end = i;
        for next in &tokens[i + 1..] {
            if next.lits != first.lits || next.nums.len() != first.nums.len() {
                break;
            }
            // COMPAT(energon 7.4): bracecollapse.py:_streaming_mode compares numeric fields by
            // value, so `a01b1`, `a1b2` would collapse to `a01b{1..2}`, which expands to a name
            // that is not in the input. We compare the digits as written, so such names stay
            // apart; where the reference's output is correct, ours is identical.
            let diffs: Vec<usize> =
                (0..next.nums.len()).filter(|&k| next.nums[k] != prev.nums[k]).collect();
            let [k] = diffs[..] else { break };
            if next.nums[k].len() != prev.nums[k].len() {
                break;
            }
            match var_idx {
                None => var_idx = Some(k),
                Some(v) if v != k => break,
                Some(_) => {}
            }
            if !is_successor(prev.nums[k], next.nums[k]) {
                break;
            }
            run_end += 1;
            prev = next;
        }
        match var_idx {
            Some(k) if run_end > i => {
                res.push(first.with_range(k, first.nums[k], prev.nums[k]));
                i = run_end + 1;
            }
            _ => {
                res.push(names[i].clone());
                i += 1;
            }
        }
    }
    res
}

/// A name split into literals and digit runs: `lits[0] nums[0] lits[1] ... nums[n-1] lits[n]`.
struct Tokens<'a> {
    lits: Vec<&'a str>,
    nums: Vec<&'a str>,
}

impl<'a> Tokens<'a> {
    fn new(s: &'a str) -> Self {
        let bytes = s.as_bytes();
        let (mut lits, mut nums) = (Vec::new(), Vec::new());
        let (mut lit_start, mut pos) = (0, 0);
        while pos < bytes.len() {
            if bytes[pos].is_ascii_digit() {
                let num_start = pos;
                while pos < bytes.len() && bytes[pos].is_ascii_digit() {
                    pos += 1;
                }
                lits.push(&s[lit_start..num_start]);
                nums.push(&s[num_start..pos]);
                lit_start = pos;
            } else {
                pos += 1;
            }
        }
        lits.push(&s[lit_start..]);
        Tokens { lits, nums }
    }

    /// The name with numeric field `k` replaced by `{start..end}`.
    fn with_range(&self, k: usize, start: &str, end: &str) -> String {
        let mut out = String::new();
        for (i, num) in self.nums.iter().enumerate() {
            out.push_str(self.lits[i]);
            if i == k {
                out.push_str(&format!("{{{start}..{end}}}"));
            } else {
                out.push_str(num);
            }
        }
        out.push_str(self.lits[self.nums.len()]);
        out
    }
}

/// Whether the decimal `b` equals `a + 1` (arbitrary length, equal width checked by the caller).
fn is_successor(a: &str, b: &str) -> bool {
    let mut carry = true;
    let mut incremented: Vec<u8> = a.bytes().collect();
    for digit in incremented.iter_mut().rev() {
        if !carry {
            break;
        }
        if *digit == b'9' {
            *digit = b'0';
        } else {
            *digit += 1;
            carry = false;
        }
    }
    if carry {
        // a was all nines: a + 1 has one more digit.
        incremented.insert(0, b'1');
    }
    incremented == b.as_bytes()
}
