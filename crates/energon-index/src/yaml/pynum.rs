//! Python's number syntax: what `int(s)` and `float(s)` accept, and how `repr(float)` prints.
//!
//! Energon casts YAML scalars and `--split-ratio` fields with Python's `int()` and `float()`, and
//! PyYAML prints floats through `repr()`, so these rules decide both what we read and what we write.
//! Only ASCII digits are recognised; Python also accepts other Unicode decimal digits.

/// The result of reading a string as Python's `int(s)` would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PyInt {
    /// `int(s)` would raise `ValueError`.
    NotAnInt,
    /// A valid integer that does not fit in 128 bits.
    TooLarge,
    /// The value.
    Value(i128),
}

/// Python's `str.strip()` set of whitespace, close enough: Unicode `White_Space` plus the
/// ASCII separator controls that `str.isspace()` also counts.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || matches!(c, '\x1c'..='\x1f')
}

/// Strips Python whitespace from both ends, as `int()` and `float()` do before parsing.
pub(crate) fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Splits an optional leading sign.
fn split_sign(s: &str) -> (bool, &str) {
    match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    }
}

/// Reads Python's `digitpart`: ASCII digits with single underscores between digits.
///
/// Returns the digits without underscores and the number of bytes consumed, or `None` when `s`
/// does not start with a digit.
fn digit_part(s: &str) -> Option<(String, usize)> {
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let mut digits = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_digit() {
            digits.push(char::from(b));
            i += 1;
        } else if b == b'_' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            i += 1;
        } else {
            break;
        }
    }
    Some((digits, i))
}

/// Reads `s` as Python's `int(s)` (base 10) would.
pub(crate) fn py_int(s: &str) -> PyInt {
    let (negative, body) = split_sign(py_strip(s));
    let Some((digits, used)) = digit_part(body) else { return PyInt::NotAnInt };
    if used != body.len() {
        return PyInt::NotAnInt;
    }
    let mut value: i128 = 0;
    for d in digits.bytes() {
        let digit = i128::from(d - b'0');
        let next = value
            .checked_mul(10)
            .and_then(|v| if negative { v.checked_sub(digit) } else { v.checked_add(digit) });
        match next {
            Some(v) => value = v,
            None => return PyInt::TooLarge,
        }
    }
    PyInt::Value(value)
}

/// Reads `s` as Python's `float(s)` would; `None` where Python raises `ValueError`.
///
/// Accepts `inf`, `infinity` and `nan` in any case, underscores between digits, and the forms
/// `1.`, `.5`, `1e5`. Values too large for `f64` become infinite, as in Python.
pub(crate) fn py_float(s: &str) -> Option<f64> {
    let (negative, body) = split_sign(py_strip(s));
    let lower = body.to_ascii_lowercase();
    let magnitude = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => parse_decimal(body)?,
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// Parses an unsigned decimal float literal (`digitpart`, optional fraction, optional exponent).
fn parse_decimal(s: &str) -> Option<f64> {
    let mut rest = s;
    let int_digits = match digit_part(rest) {
        Some((digits, used)) => {
            rest = &rest[used..];
            digits
        }
        None => String::new(),
    };
    let mut frac_digits = String::new();
    if let Some(after_dot) = rest.strip_prefix('.') {
        rest = after_dot;
        if let Some((digits, used)) = digit_part(rest) {
            frac_digits = digits;
            rest = &rest[used..];
        }
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return None;
    }
    let mut exponent = String::from("0");
    if let Some(after_e) = rest.strip_prefix(['e', 'E']) {
        let (exp_negative, exp_body) = split_sign(after_e);
        let (digits, used) = digit_part(exp_body)?;
        if used != exp_body.len() {
            return None;
        }
        exponent = if exp_negative { format!("-{digits}") } else { digits };
        rest = "";
    }
    if !rest.is_empty() {
        return None;
    }
    let int_digits = if int_digits.is_empty() { "0".to_owned() } else { int_digits };
    let frac_digits = if frac_digits.is_empty() { "0".to_owned() } else { frac_digits };
    format!("{int_digits}.{frac_digits}e{exponent}").parse().ok()
}

/// Formats `value` exactly as Python's `repr(float)`: the shortest round-trip digits, positional
/// notation for decimal exponents in `-4..16`, scientific (`1e+16`, `1.5e-05`) outside.
pub(crate) fn py_float_repr(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_owned();
    }
    if value.is_infinite() {
        return if value < 0.0 { "-inf".to_owned() } else { "inf".to_owned() };
    }
    let sign = if value.is_sign_negative() { "-" } else { "" };
    // Rust's `{:e}` yields the shortest round-trip digits, like Python's repr.
    let sci = format!("{:e}", value.abs());
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` output always contains an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // Position of the decimal point relative to the start of `digits`.
    let decpt = exp + 1;
    let n_digits = i32::try_from(digits.len()).expect("a float has at most 17 significant digits");
    let body = if (-3..=16).contains(&decpt) {
        if decpt <= 0 {
            format!("0.{}{digits}", "0".repeat(usize::try_from(-decpt).unwrap_or(0)))
        } else if decpt >= n_digits {
            format!("{digits}{}.0", "0".repeat(usize::try_from(decpt - n_digits).unwrap_or(0)))
        } else {
            let (int_part, frac_part) = digits.split_at(usize::try_from(decpt).unwrap_or(0));
            format!("{int_part}.{frac_part}")
        }
    } else {
        let (first, tail) = digits.split_at(1);
        let exp_sign = if exp < 0 { '-' } else { '+' };
        let point = if tail.is_empty() { String::new() } else { format!(".{tail}") };
        format!("{first}{point}e{exp_sign}{:02}", exp.abs())
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_follows_python() {
        assert_eq!(py_int("42"), PyInt::Value(42));
        assert_eq!(py_int(" -0007 "), PyInt::Value(-7));
        assert_eq!(py_int("+1_000"), PyInt::Value(1000));
        assert_eq!(py_int("1__0"), PyInt::NotAnInt);
        assert_eq!(py_int("_1"), PyInt::NotAnInt);
        assert_eq!(py_int("1_"), PyInt::NotAnInt);
        assert_eq!(py_int("0x10"), PyInt::NotAnInt);
        assert_eq!(py_int(""), PyInt::NotAnInt);
        assert_eq!(py_int("-"), PyInt::NotAnInt);
        assert_eq!(py_int("1.0"), PyInt::NotAnInt);
        assert_eq!(py_int(&"9".repeat(40)), PyInt::TooLarge);
        assert_eq!(py_int(&i128::MIN.to_string()), PyInt::Value(i128::MIN));
    }

    #[test]
    fn float_follows_python() {
        assert_eq!(py_float("1.5"), Some(1.5));
        assert_eq!(py_float("1."), Some(1.0));
        assert_eq!(py_float(".5"), Some(0.5));
        assert_eq!(py_float("-1e3"), Some(-1000.0));
        assert_eq!(py_float("1E-2"), Some(0.01));
        assert_eq!(py_float(" 1_0.2_5 "), Some(10.25));
        assert_eq!(py_float("Infinity"), Some(f64::INFINITY));
        assert_eq!(py_float("-inf"), Some(f64::NEG_INFINITY));
        assert!(py_float("nan").is_some_and(f64::is_nan));
        assert_eq!(py_float("1e999"), Some(f64::INFINITY));
        for bad in [".", "e5", "1e", "1.2.3", "1_.5", "._5", "1e+", "abc", "", "1 2", ".e1"] {
            assert_eq!(py_float(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn float_repr_follows_python() {
        let cases = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e16, "1.5e+16"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (123.456, "123.456"),
            (1e100, "1e+100"),
            (0.3333333333333333, "0.3333333333333333"),
            (f64::INFINITY, "inf"),
        ];
        for (value, want) in cases {
            assert_eq!(py_float_repr(value), want, "{value}");
        }
    }
}
