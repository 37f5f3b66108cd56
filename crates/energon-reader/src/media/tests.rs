//! Tests of media probing and the media pass.

mod pipeline;
mod probes;
