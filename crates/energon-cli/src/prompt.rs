//! Interactive prompts: used when standard input is a terminal (or answers are piped in with
//! `ENERGON_INTERACTIVE=1`); never hangs without one: the end of input ends a prompt.

use std::io::{self, BufRead, IsTerminal, Write};

/// The environment variable that makes prompts read answers from a standard input that is not a
/// terminal (scripted answers, one a line).
pub(crate) const INTERACTIVE_VAR: &str = "ENERGON_INTERACTIVE";

/// Whether prompts can be shown: standard input is a terminal, or `ENERGON_INTERACTIVE=1`.
pub(crate) fn interactive() -> bool {
    io::stdin().is_terminal() || std::env::var_os(INTERACTIVE_VAR).is_some_and(|v| v == "1")
}

/// Asks a question and returns the trimmed answer; `None` at end of input.
pub(crate) fn ask(question: &str) -> io::Result<Option<String>> {
    let mut out = io::stderr();
    write!(out, "{question}")?;
    out.flush()?;
    let mut line = String::new();
    if io::stdin().lock().read_line(&mut line)? == 0 {
        return Ok(None);
    }
    Ok(Some(line.trim().to_owned()))
}

/// Asks a yes/no question with a default answer.
pub(crate) fn confirm(question: &str, default: bool) -> io::Result<bool> {
    let hint = if default { "[Y/n]" } else { "[y/N]" };
    loop {
        let Some(answer) = ask(&format!("{question} {hint}: "))? else { return Ok(default) };
        match answer.to_ascii_lowercase().as_str() {
            "" => return Ok(default),
            "y" | "yes" => return Ok(true),
            "n" | "no" => return Ok(false),
            _ => continue,
        }
    }
}
