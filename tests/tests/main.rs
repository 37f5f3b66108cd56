//! Cross-crate integration tests.
#![allow(clippy::unwrap_used)]

mod tidy;
