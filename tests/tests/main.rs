//! Cross-crate integration tests.
#![allow(clippy::unwrap_used)]

mod layering;
mod loader_golden;
mod loader_props;
mod tidy;
