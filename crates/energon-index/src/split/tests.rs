//! Tests of the split module.
