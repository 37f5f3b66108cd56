//! The `energon` command: prepare, inspect and load Energon datasets.

fn main() {}
