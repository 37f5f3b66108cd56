//! Integration tests of energon-cook through its public API: the reference's recorded orders and
//! resume traces, save/restore properties over random pipelines, task encoder stages, errors.
#![allow(clippy::unwrap_used)]

mod elastic;
mod linked;
mod mix_traces;
mod plans;
mod props;
mod resume;
mod spec;
mod stages;
mod util;
