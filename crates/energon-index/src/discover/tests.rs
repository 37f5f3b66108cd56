//! Tests of the discover module.
