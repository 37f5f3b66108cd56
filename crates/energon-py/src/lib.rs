//! Python bindings: the native module `energon_rs._native`.
//!
//! The public API is the Python package `energon_rs` (in `python/`), which wraps these private
//! classes: `_Reader` (random access), `_DatasetSpec` (a dataset or metadataset with its
//! pipeline settings), `_Loader` (iteration over the Rust loader), `_FileStore` (files by name,
//! with their media metadata), the metadataset functions, the storage functions of `EPath` and the exception hierarchy of module
//! `errors`. Each method converts its arguments, calls into the Rust crates with the GIL
//! released, and converts the result.

#[cfg(feature = "video")]
mod av;
mod buffer;
mod combined;
mod contract;
mod convert;
mod dataset;
mod encoder;
mod errors;
mod file_store;
mod hooks;
mod loader;
mod metadataset;
mod mix;
mod prepare;
mod sample;
mod storage;
mod workers;

use pyo3::prelude::*;

/// The worker seed of local worker `local_worker_id` (the reference's `WorkerConfig.worker_seed`).
#[pyfunction]
#[pyo3(signature = (rank, world_size, num_workers, seed_offset = 0, local_worker_id = 0))]
fn worker_seed(
    rank: usize,
    world_size: usize,
    num_workers: usize,
    seed_offset: i64,
    local_worker_id: usize,
) -> PyResult<u32> {
    let config = energon_dist::WorkerConfig::new(rank, world_size, num_workers)
        .map_err(|e| errors::to_py_err(&e))?
        .with_seed_offset(seed_offset);
    let seed = config.worker_seed(local_worker_id).map_err(|e| errors::to_py_err(&e))?;
    Ok(seed.get())
}

/// Runs the `energon` command line `args` (the program name first) in this process, as the
/// `energon` program does, and returns its exit status (the GIL is released meanwhile).
#[pyfunction]
fn run_cli(py: Python<'_>, args: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| energon_cli::run(args))
}

/// The native extension module. It declares that it does not need the GIL: every class is
/// `Sync` (PyO3 checks it), the Rust state they share is behind locks or atomics, and Python
/// objects are touched only while attached to the interpreter; so on a free-threaded
/// interpreter the loader's worker threads run Python hooks in parallel.
#[pymodule(gil_used = false)]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<buffer::Buffer>()?;
    #[cfg(feature = "video")]
    m.add_class::<av::PyAvDecoder>()?;
    m.add_class::<dataset::Reader>()?;
    m.add_class::<dataset::DatasetSpec>()?;
    m.add_class::<combined::CombinedSpec>()?;
    m.add_class::<loader::PyLoader>()?;
    m.add_class::<loader::WaitingOn>()?;
    m.add_class::<contract::HookSet>()?;
    m.add_class::<file_store::PyFileStore>()?;
    m.add_function(wrap_pyfunction!(worker_seed, m)?)?;
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(loader::checkpoint_topology, m)?)?;
    m.add_function(wrap_pyfunction!(loader::reshape_checkpoints, m)?)?;
    m.add_function(wrap_pyfunction!(workers::serve_worker, m)?)?;
    m.add_function(wrap_pyfunction!(metadataset::dataset_kind, m)?)?;
    m.add_function(wrap_pyfunction!(metadataset::resolve_metadataset, m)?)?;
    m.add_function(wrap_pyfunction!(metadataset::traverse_metadataset, m)?)?;
    m.add_function(wrap_pyfunction!(prepare::prepare_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(prepare::prepare_jsonl, m)?)?;
    m.add_function(wrap_pyfunction!(prepare::prepare_metadataset, m)?)?;
    m.add_function(wrap_pyfunction!(prepare::prepare_media, m)?)?;
    m.add_function(wrap_pyfunction!(prepare::dataset_config, m)?)?;
    storage::register(m)?;
    Ok(())
}
