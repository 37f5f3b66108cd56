//! Energon-compatible distribution arithmetic: worker configuration, sample slicing, seeds and RNG streams.
//!
//! This crate is pure: it performs no I/O and knows no file format.
#![deny(missing_docs)]
