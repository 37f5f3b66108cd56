//! The `energon` program: the command line of [`energon_cli::run`].

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(energon_cli::run(std::env::args_os()))
}
