//! Random-access sample reading from prepared datasets: shards, samples, decoders and sample types.
#![deny(missing_docs)]
