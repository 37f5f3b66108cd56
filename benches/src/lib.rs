//! Whole-pipeline benchmarks for energon-rs.
