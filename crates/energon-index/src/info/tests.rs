//! Tests of the info module.
