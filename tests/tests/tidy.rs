//! Tidy checks: the file conventions, checked in `cargo test` (the dependency rules are in
//! `layering`).

use std::{
    fs,
    path::{Path, PathBuf},
};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The files under `dir` whose extension is one of `extensions` (build outputs and hidden
/// folders left out).
fn files_with(dir: &Path, extensions: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            files_with(&path, extensions, out);
        } else if path.extension().is_some_and(|e| extensions.iter().any(|x| e == *x)) {
            out.push(path);
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_with(dir, &["rs"], out);
}

fn all_rust_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut res = Vec::new();
    for dir in ["crates", "tests", "benches", "examples"] {
        rust_files(&root.join(dir), &mut res);
    }
    res.sort();
    res
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let bad: Vec<_> = all_rust_files()
        .into_iter()
        .filter(|p| !fs::read_to_string(p).unwrap().starts_with("//!"))
        .collect();
    assert!(bad.is_empty(), "files without a leading `//!` doc line: {bad:#?}");
}

#[test]
fn no_rust_file_is_too_long() {
    const MAX_LINES: usize = 900;
    let bad: Vec<_> = all_rust_files()
        .into_iter()
        .filter_map(|p| {
            let n = fs::read_to_string(&p).unwrap().lines().count();
            (n > MAX_LINES).then_some((p, n))
        })
        .collect();
    assert!(bad.is_empty(), "files over {MAX_LINES} lines (split them): {bad:#?}");
}

#[test]
fn nothing_reads_outside_the_repository() {
    // A clone has nothing beside it: test data lives in `tests/fixtures/` (see its README).
    let mut files = all_rust_files();
    for dir in ["crates", "examples", "scripts", "tests"] {
        let scripts_and_data = ["sh", "py", "yaml", "yml", "md", "toml"];
        files_with(&repo_root().join(dir), &scripts_and_data, &mut files);
    }
    let outside = format!("../{}/", "shared");
    let bad: Vec<_> = files
        .into_iter()
        .filter(|p| fs::read_to_string(p).is_ok_and(|text| text.contains(&outside)))
        .collect();
    assert!(bad.is_empty(), "files that read outside the repository: {bad:#?}");
}

/// The backticked words of `text`.
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

#[test]
fn every_module_and_path_architecture_md_names_exists() {
    let root = repo_root();
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let missing = missing_names(&root, &text);
    assert!(missing.is_empty(), "ARCHITECTURE.md names what does not exist: {missing:#?}");
    // A stale claim is seen.
    let stale = text.replacen("- `stage`, ", "- `stage`, `gone`, ", 1) + "\n`docs/gone.md`\n";
    assert_eq!(missing_names(&root, &stale), ["docs/gone.md", "energon-cook: module `gone`"]);
}

/// The repository paths and crate modules (the modules each crate section's bullets start with)
/// that `text` names and that do not exist under `root`.
fn missing_names(root: &Path, text: &str) -> Vec<String> {
    let mut missing = Vec::new();
    // Paths of the repository.
    let roots = ["crates/", "tests/", "scripts/", "docs/", "examples/", "benches/"];
    for word in backticked(text) {
        if roots.iter().any(|r| word.starts_with(r))
            && !word.contains(' ')
            && !root.join(word).exists()
        {
            missing.push(word.to_owned());
        }
    }
    // In each crate's section, the modules its bullets start with (`a`, `b::c`: ...).
    let mut krate: Option<&str> = None;
    for line in text.lines() {
        if line.starts_with('#') {
            krate = line.strip_prefix("### `crates/").and_then(|rest| rest.split('`').next());
            continue;
        }
        let (Some(krate), Some(lead)) = (krate, line.strip_prefix("- ")) else { continue };
        let lead = lead.split(':').next().unwrap();
        // Parenthesised remarks name types and settings, not modules.
        let mut plain = String::new();
        let mut depth = 0;
        for c in lead.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        for name in backticked(&plain) {
            let module = name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':');
            if !module {
                continue;
            }
            let path = root.join("crates").join(krate).join("src").join(name.replace("::", "/"));
            if !path.with_extension("rs").is_file() && !path.is_dir() {
                missing.push(format!("{krate}: module `{name}`"));
            }
        }
    }
    missing
}

/// Words whose period ends no sentence.
const ABBREVIATIONS: [&str; 10] =
    ["e.g", "i.e", "vs", "cf", "approx", "no", "Fig", "St", "Mr", "Dr"];

/// Where in `line` a second sentence starts (the end of the first), if it does: a `.`, `!` or
/// `?` after a lower-case word, a number or a closing mark, then spaces and a capital (or a
/// code span, link or emphasis), outside code spans and abbreviations.
fn second_sentence(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    let mut ticks = 0;
    for i in 1..b.len() {
        if b[i - 1] == b'`' {
            ticks += 1;
        }
        let prev = b[i - 1];
        let ends = matches!(b[i], b'.' | b'!' | b'?')
            && ticks % 2 == 0
            && (prev.is_ascii_lowercase() || prev.is_ascii_digit() || b")`]*_'\"".contains(&prev));
        if !ends {
            continue;
        }
        let rest = &line[i + 1..];
        let next = rest.trim_start_matches(' ');
        let starts = next.len() < rest.len()
            && next.bytes().next().is_some_and(|c| c.is_ascii_uppercase() || b"`([*".contains(&c));
        let word = line[..i].rsplit(|c: char| !(c.is_ascii_alphabetic() || c == '.')).next();
        let abbreviation = word.is_some_and(|w| ABBREVIATIONS.contains(&w.trim_end_matches('.')));
        let list_marker = line[..i].trim_start().bytes().all(|c| c.is_ascii_digit());
        if starts && !abbreviation && !list_marker {
            return Some(i);
        }
    }
    None
}

#[test]
fn markdown_has_one_sentence_per_line() {
    let mut files = Vec::new();
    files_with(&repo_root(), &["md"], &mut files);
    let mut bad = Vec::new();
    for file in files {
        let mut in_code = false;
        for (n, line) in fs::read_to_string(&file).unwrap().lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") {
                in_code = !in_code;
                continue;
            }
            if in_code || trimmed.starts_with(['|', '#']) {
                continue;
            }
            if second_sentence(line).is_some() {
                bad.push(format!("{}:{}: {line}", file.display(), n + 1));
            }
        }
    }
    assert!(bad.is_empty(), "one sentence per line (diffs stay small): {bad:#?}");
    assert_eq!(second_sentence("It ends. Another starts."), Some(7));
    assert_eq!(second_sentence("Abbreviations, e.g. These, and `code. Spans` stay."), None);
    assert_eq!(second_sentence("12. `A numbered item` is one sentence."), None);
}
