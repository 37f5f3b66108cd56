//! Sample orders recorded from the reference loader.
