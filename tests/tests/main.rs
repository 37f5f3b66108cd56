//! Cross-crate integration tests.

mod tidy;
