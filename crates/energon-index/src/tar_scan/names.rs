//! Member name → (sample key, part name) mapping, and the `__x__` skip rule.
//!
//! Both functions reproduce a Python regular expression of the reference exactly, without a
//! regex engine, including the corners where the expression does something surprising (see the
//! tests; the property tests compare against the expressions themselves).

/// Splits a member name into its sample key and part name, as the reference's
/// `^((?:.*/|)[^.]+)[.]([^/]*)$` does.
///
/// The key is the directory prefix plus the basename up to its first dot, the part is the rest
/// of the basename (it may contain dots, or be empty): `a/b/0001.seg.png` → (`a/b/0001`,
/// `seg.png`). Names whose basename has no dot do not match.
///
/// Corners reproduced from the expression (COMPAT(energon 7.4): `prepare.py`, `split_name_re`):
/// `./0001.txt` keeps its `./` in the key; a basename starting with a dot matches only when some
/// directory component after the last dot-containing component can stand in for the key, so
/// `a/.b` → (`a/`, `b`) but `.b` and `x.y/.b` do not match; a newline in the directory part
/// (`.` does not match it in the expression) can prevent the match.
pub fn split_key_part(name: &str) -> Option<(&str, &str)> {
    let bytes = name.as_bytes();
    let base_start = memrchr(b'/', bytes).map_or(0, |s| s + 1);
    let dot = base_start + bytes[base_start..].iter().position(|&b| b == b'.')?;
    // The expression's key group is `(?:.*/|)[^.]+`: an optional prefix ending in a slash that
    // `.*` reaches (no newline before it), then at least one non-dot character up to the dot.
    // Whatever prefix is used, the key ends at the first dot after it, so the key is
    // `name[..dot]` whenever some prefix works; the prefix must end after every dot before the
    // basename.
    let matched = match memrchr(b'.', &bytes[..base_start]) {
        // No dot in the directory part: the empty prefix works if the key is not empty.
        None => dot > 0,
        // The best candidate is the first slash after the last directory dot: it needs at
        // least one character between it and `dot`, and no newline before it.
        Some(last_dir_dot) => {
            let slash = last_dir_dot
                + 1
                + bytes[last_dir_dot + 1..]
                    .iter()
                    .position(|&b| b == b'/')
                    .expect("a slash ends the directory part after its last dot");
            slash + 2 <= dot && !bytes[..slash].contains(&b'\n')
        }
    };
    matched.then(|| (&name[..dot], &name[dot + 1..]))
}

/// Whether a member is skipped by the reference's `__[^/]*__($|/)` rule (matched at the start
/// of the name): `__meta__/x.json`, `__key__`, `____`.
///
/// As in Python, `$` also matches before a final newline (COMPAT(energon 7.4): `prepare.py`,
/// `skip_meta_re`).
pub fn is_skipped(name: &str) -> bool {
    let bytes = name.as_bytes();
    if !bytes.starts_with(b"__") {
        return false;
    }
    let is_dunder = |seg: &[u8]| seg.len() >= 4 && seg.ends_with(b"__");
    match bytes.iter().position(|&b| b == b'/') {
        Some(slash) => is_dunder(&bytes[..slash]),
        None => is_dunder(bytes) || bytes.strip_suffix(b"\n").is_some_and(is_dunder),
    }
}

fn memrchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().rposition(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[track_caller]
    fn check_split(name: &str, expected: Option<(&str, &str)>) {
        assert_eq!(split_key_part(name), expected, "{name:?}");
    }

    #[test]
    fn split_examples() {
        check_split("a/b/0001.jpg", Some(("a/b/0001", "jpg")));
        check_split("0001.seg.png", Some(("0001", "seg.png")));
        check_split("x.y/abc.d", Some(("x.y/abc", "d")));
        check_split("./0001.txt", Some(("./0001", "txt")));
        check_split("a.", Some(("a", "")));
        check_split("a/b", None);
        check_split("a.b/c", None);
        check_split("", None);
        check_split(".b", None);
        check_split("a/.b", Some(("a/", "b")));
        check_split("x.y/.b", None);
        check_split("x.y/z/.b", Some(("x.y/z/", "b")));
        check_split("x.y//.b", Some(("x.y//", "b")));
        check_split("p.q\nr/a.b", None);
        check_split("x\ny/a.b", Some(("x\ny/a", "b")));
        check_split("a.b\n", Some(("a", "b\n")));
        check_split("é/ü.ß", Some(("é/ü", "ß")));
    }

    #[test]
    fn skip_examples() {
        for name in ["__a__", "__a__/x", "__abc__\n", "____", "__meta__/0.json", "__a.b__/c/d"] {
            assert!(is_skipped(name), "{name:?}");
        }
        for name in ["___", "__a_/b__", "x__a__", "__a__x", "_a__", "", "__", "__a__\n\n"] {
            assert!(!is_skipped(name), "{name:?}");
        }
    }

    fn name_strategy() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![Just('a'), Just('.'), Just('/'), Just('_'), Just('\n')],
            0..12,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    proptest! {
        #[test]
        fn split_matches_reference_expression(name in name_strategy()) {
            // The regex crate agrees with Python `re` here: `.` excludes `\n` in both, and `$`
            // can only match at the very end because `[^/]*` consumes a final newline.
            let re = regex::Regex::new(r"^((?:.*/|)[^.]+)[.]([^/]*)$").unwrap();
            let expected = re.captures(&name).map(|c| {
                (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str())
            });
            prop_assert_eq!(split_key_part(&name), expected);
        }

        #[test]
        fn skip_matches_reference_expression(name in name_strategy()) {
            // Python's `$` also matches before a final newline; spell that out for the regex crate.
            let re = regex::Regex::new(r"^__[^/]*__(\n?\z|/)").unwrap();
            prop_assert_eq!(is_skipped(&name), re.is_match(&name));
        }
    }
}
