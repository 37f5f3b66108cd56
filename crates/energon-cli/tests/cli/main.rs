//! End-to-end tests of the `energon` binary: one test binary, one module per command.
#![allow(clippy::unwrap_used)]

mod prepare;
mod read;
mod trace;
mod util;
