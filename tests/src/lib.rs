//! Shared test helpers for energon-rs: synthetic datasets and fixture paths.
