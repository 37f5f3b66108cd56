//! End-to-end tests of the `energon` binary.
