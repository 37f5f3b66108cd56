//! End-to-end tests of the `energon` binary: one test binary, one module per command.
#![allow(clippy::unwrap_used)]

mod changed;
mod checkpoint;
mod faults;
mod media;
mod mount;
mod prepare;
mod read;
mod remote;
mod tables;
mod trace;
mod util;

/// The commands ARCHITECTURE.md names for energon-cli are the ones `energon --help` lists.
#[test]
fn the_documented_commands_are_the_commands() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ARCHITECTURE.md"),
    )
    .unwrap();
    let section = doc.split("### `crates/energon-cli`").nth(1).unwrap();
    let paragraph = section.split("\n\n").nth(1).unwrap();
    let mut documented: Vec<&str> = paragraph
        .split('`')
        .skip(1)
        .step_by(2)
        .take_while(|name| name.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
        .collect();
    let help = util::run_ok(util::energon().arg("--help"));
    let mut listed: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|&name| name != "help")
        .collect();
    documented.sort_unstable();
    listed.sort_unstable();
    assert_eq!(documented, listed, "ARCHITECTURE.md's command list is not `energon --help`'s");
}
