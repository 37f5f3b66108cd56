//! Tests of the slicing.
