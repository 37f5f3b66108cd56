//! Python's `fnmatch.fnmatchcase` on POSIX: shell-style wildcards over a whole name.
//!
//! `*` matches any run of characters (slashes included), `?` any one character, `[seq]` one
//! character of the set (ranges `a-z`, `[!seq]` negates, a `]` right after `[` or `[!` is a
//! member), and a `[` without a closing `]` is a literal. Matching is case-sensitive.

/// One element of a compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    Any,
    Star,
    Set { negated: bool, items: Vec<(char, char)> },
}

fn compile(pattern: &str) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' => {
                if tokens.last() != Some(&Token::Star) {
                    tokens.push(Token::Star);
                }
            }
            '?' => tokens.push(Token::Any),
            '[' => {
                let mut j = i;
                if j < chars.len() && chars[j] == '!' {
                    j += 1;
                }
                if j < chars.len() && chars[j] == ']' {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    tokens.push(Token::Literal('['));
                    continue;
                }
                let body = &chars[i..j];
                i = j + 1;
                let (negated, body) = match body.split_first() {
                    Some(('!', rest)) => (true, rest),
                    _ => (false, body),
                };
                let mut items = Vec::new();
                let mut k = 0;
                while k < body.len() {
                    if k + 2 < body.len() && body[k + 1] == '-' {
                        // A reversed range (`z-a`) matches nothing, as in Python.
                        if body[k] <= body[k + 2] {
                            items.push((body[k], body[k + 2]));
                        }
                        k += 3;
                    } else {
                        items.push((body[k], body[k]));
                        k += 1;
                    }
                }
                tokens.push(Token::Set { negated, items });
            }
            c => tokens.push(Token::Literal(c)),
        }
    }
    tokens
}

fn matches_one(token: &Token, c: char) -> bool {
    match token {
        Token::Literal(l) => *l == c,
        Token::Any => true,
        Token::Set { negated, items } => {
            items.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
        Token::Star => unreachable!("stars are handled by the matcher"),
    }
}

/// Whether `name` matches the shell-style `pattern` as a whole.
pub(crate) fn fnmatch(name: &str, pattern: &str) -> bool {
    let tokens = compile(pattern);
    let chars: Vec<char> = name.chars().collect();
    // Classic wildcard matching with one backtrack point per star (linear in practice).
    let (mut t, mut c) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while c < chars.len() {
        match tokens.get(t) {
            Some(Token::Star) => {
                star = Some((t, c));
                t += 1;
            }
            Some(token) if matches_one(token, chars[c]) => {
                t += 1;
                c += 1;
            }
            _ => match star {
                Some((st, sc)) => {
                    t = st + 1;
                    c = sc + 1;
                    star = Some((st, sc + 1));
                }
                None => return false,
            },
        }
    }
    tokens[t..].iter().all(|tok| *tok == Token::Star)
}

#[cfg(test)]
mod tests {
    use super::fnmatch;

    #[test]
    fn follows_python_fnmatchcase() {
        let cases = [
            ("a.jpg", "*.jpg", true),
            ("dir/a.jpg", "*.jpg", true),
            ("a.jpg", "*.JPG", false),
            ("a.jpeg", "*.jp?g", true),
            ("a.jpg", "a.jp", false),
            ("", "*", true),
            ("", "?", false),
            ("abc", "a*c", true),
            ("abcbc", "a*bc", true),
            ("ab", "a*b*c", false),
            ("a1.png", "a[0-9].png", true),
            ("ax.png", "a[0-9].png", false),
            ("ax.png", "a[!0-9].png", true),
            ("a].png", "a[]].png", true),
            ("a!.png", "a[!].png", false),
            ("ab", "a[!]b", false),
            ("a[b", "a[b", true),
            ("a-", "a[-x]", true),
            ("ab", "a[z-a]", false),
            ("a\\b", "a\\b", true),
            ("x.wav", "*.wav", true),
            ("émoji.wav", "?moji.wav", true),
        ];
        for (name, pattern, want) in cases {
            assert_eq!(fnmatch(name, pattern), want, "{name:?} ~ {pattern:?}");
        }
    }
}
