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
