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
