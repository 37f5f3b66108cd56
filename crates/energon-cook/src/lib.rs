//! Task encoders, shuffle buffer, batching, packing and the resumable loader.
#![deny(missing_docs)]
