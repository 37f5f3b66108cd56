//! Files and objects by path for `EPath`: energon-index's storage layer (local paths, `s3://`,
//! `gs://`, `az://`, `msc://`) as plain functions. I/O errors become Python's `OSError`
//! subclasses (a missing object is `FileNotFoundError`).

use std::path::PathBuf;

use bytes::Bytes;
use energon_index::storage;
use pyo3::{prelude::*, types::PyBytes};

/// The normal form of `path`: a remote URL normalized (`s3://b//a/../c` is `s3://b/c`; an
/// `msc://` profile of type `file` gives its local path), a local path as it is.
#[pyfunction]
pub(crate) fn storage_normalize(path: PathBuf) -> PyResult<String> {
    let path = storage::normalize(&path)?;
    Ok(path.to_string_lossy().into_owned())
}

/// The whole content of a file or object.
#[pyfunction]
pub(crate) fn storage_read<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = py.detach(|| storage::read(&path))?;
    Ok(PyBytes::new(py, &bytes))
}

/// Writes a file or object at once (readers see the old content or the new one).
#[pyfunction]
pub(crate) fn storage_write(py: Python<'_>, path: PathBuf, data: Vec<u8>) -> PyResult<()> {
    py.detach(|| storage::write_atomic(&path, Bytes::from(data)))?;
    Ok(())
}

/// The size of a file or object in bytes.
#[pyfunction]
pub(crate) fn storage_size(py: Python<'_>, path: PathBuf) -> PyResult<u64> {
    Ok(py.detach(|| storage::size(&path))?)
}

/// Whether `path` is a file or an object (a missing one is `False`; an unreachable store raises).
#[pyfunction]
pub(crate) fn storage_is_file(py: Python<'_>, path: PathBuf) -> PyResult<bool> {
    Ok(py.detach(|| storage::try_is_file(&path))?)
}

/// Whether `path` is a folder or a prefix with objects under it.
#[pyfunction]
pub(crate) fn storage_is_dir(py: Python<'_>, path: PathBuf) -> PyResult<bool> {
    Ok(py.detach(|| storage::try_is_dir(&path))?)
}

/// Every object under the remote prefix `path` (any depth) as `(relative name, size)`, sorted.
#[pyfunction]
pub(crate) fn storage_list(py: Python<'_>, path: PathBuf) -> PyResult<Vec<(String, u64)>> {
    let listed = py.detach(|| storage::list_files(&path))?;
    Ok(listed.into_iter().map(|l| (l.name, l.size)).collect())
}

/// Registers the functions.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(storage_normalize, m)?)?;
    m.add_function(wrap_pyfunction!(storage_read, m)?)?;
    m.add_function(wrap_pyfunction!(storage_write, m)?)?;
    m.add_function(wrap_pyfunction!(storage_size, m)?)?;
    m.add_function(wrap_pyfunction!(storage_is_file, m)?)?;
    m.add_function(wrap_pyfunction!(storage_is_dir, m)?)?;
    m.add_function(wrap_pyfunction!(storage_list, m)?)?;
    Ok(())
}
