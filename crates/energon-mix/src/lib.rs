//! Metadatasets and blending: resolves metadataset YAML trees into weighted or epochized leaves.
#![deny(missing_docs)]
