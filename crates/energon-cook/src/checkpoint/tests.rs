//! Tests of the checkpoint format.
