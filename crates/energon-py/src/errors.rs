//! Rust errors as Python exceptions: one small hierarchy under `energon_rs.EnergonError`.
//!
//! ```text
//! EnergonError(Exception)
//! ├── CorruptDatasetError       a damaged shard, index, sample or metadata file
//! ├── IncompatibleFormatError   a file from a format version energon-rs does not read
//! ├── CheckpointError           a loader state that cannot be saved or restored
//! ├── LoaderError               a worker failed or the loader cannot run
//! ├── MissingFileError          also a FileNotFoundError: a dataset, shard or index is missing
//! ├── ConfigError               also a ValueError: a bad argument, setting or configuration
//! └── EnergonIOError            also an OSError: any other I/O failure
//! ```
//!
//! The message is the Rust error's, with its causes. The class is the most specific one found
//! by walking the error and its `source()` chain, looking through the `#[error(transparent)]`
//! wrappers of the lower crates.

use std::{error::Error as StdError, io};

use energon_cook::message_with_causes;

use pyo3::{
    create_exception,
    exceptions::{PyException, PyFileNotFoundError, PyOSError, PyValueError},
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyTuple, PyType},
};

create_exception!(
    energon_rs,
    EnergonError,
    PyException,
    "Base class of every error raised by energon_rs."
);
create_exception!(
    energon_rs,
    CorruptDatasetError,
    EnergonError,
    "A shard, index, sample or metadata file is damaged."
);
create_exception!(
    energon_rs,
    IncompatibleFormatError,
    EnergonError,
    "A file was written in a format version energon-rs does not read."
);
create_exception!(
    energon_rs,
    CheckpointError,
    EnergonError,
    "A loader state cannot be saved or restored."
);
create_exception!(energon_rs, LoaderError, EnergonError, "A loader worker failed.");

/// The exception classes with two bases, made once per interpreter by [`register`].
static MISSING_FILE: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CONFIG: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static IO: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Adds the exception classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("EnergonError", py.get_type::<EnergonError>())?;
    m.add("CorruptDatasetError", py.get_type::<CorruptDatasetError>())?;
    m.add("IncompatibleFormatError", py.get_type::<IncompatibleFormatError>())?;
    m.add("CheckpointError", py.get_type::<CheckpointError>())?;
    m.add("LoaderError", py.get_type::<LoaderError>())?;
    m.add("MissingFileError", missing_file_type(py)?)?;
    m.add("ConfigError", config_type(py)?)?;
    m.add("EnergonIOError", io_type(py)?)?;
    Ok(())
}

fn missing_file_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    two_base_type(py, &MISSING_FILE, "MissingFileError", py.get_type::<PyFileNotFoundError>())
}

fn config_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    two_base_type(py, &CONFIG, "ConfigError", py.get_type::<PyValueError>())
}

fn io_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    two_base_type(py, &IO, "EnergonIOError", py.get_type::<PyOSError>())
}

/// `type(name, (EnergonError, other), {...})`: an energon error that is also a built-in one, so
/// that `except FileNotFoundError` and `except EnergonError` both catch it.
fn two_base_type<'py>(
    py: Python<'py>,
    cell: &'py PyOnceLock<Py<PyType>>,
    name: &str,
    other: Bound<'py, PyType>,
) -> PyResult<&'py Bound<'py, PyType>> {
    cell.get_or_try_init(py, || {
        let bases = PyTuple::new(py, [py.get_type::<EnergonError>(), other])?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "energon_rs")?;
        let ty = py.get_type::<PyType>().call1((name, bases, namespace))?;
        Ok(ty.cast_into::<PyType>()?.unbind())
    })
    .map(|ty| ty.bind(py))
}

/// Which Python class an error becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Corrupt,
    Incompatible,
    Checkpoint,
    Loader,
    MissingFile,
    Config,
    Io,
    Other,
}

/// The Python exception for a Rust error: the class of [`kind_of`], the message with every cause
/// (`outer: inner: ...`, as anyhow's `{:#}` prints it).
pub(crate) fn to_py_err(err: &(dyn StdError + 'static)) -> PyErr {
    let message = message_with_causes(err);
    Python::attach(|py| match kind_of(err) {
        _ if let Some(fatal) = too_many_python_failures(py, err) => fatal,
        Kind::Corrupt => CorruptDatasetError::new_err(message),
        Kind::Incompatible => IncompatibleFormatError::new_err(message),
        Kind::Checkpoint => CheckpointError::new_err(message),
        Kind::Loader => LoaderError::new_err(message),
        Kind::MissingFile => new_err(missing_file_type(py), message),
        Kind::Config => new_err(config_type(py), message),
        Kind::Io => new_err(io_type(py), message),
        Kind::Other => EnergonError::new_err(message),
    })
}

/// A hook that raised too many times in a row, as the reference reports it: `FatalSampleError`,
/// caused by the hook's last exception.
fn too_many_python_failures(py: Python<'_>, err: &(dyn StdError + 'static)) -> Option<PyErr> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(energon_cook::Error::TooManyFailures { last, .. }) = e.downcast_ref() {
            let energon_cook::Error::Hook { source, .. } = &**last else { return None };
            let cause = source.downcast_ref::<PyErr>()?;
            let class = py
                .import("energon_rs.task_encoder")
                .and_then(|m| m.getattr("FatalSampleError"))
                .and_then(|c| Ok(c.cast_into::<PyType>()?))
                .ok()?;
            let fatal = PyErr::from_type(class, message_with_causes(e));
            fatal.set_cause(py, Some(cause.clone_ref(py)));
            return Some(fatal);
        }
        current = e.source();
    }
    None
}

fn new_err(ty: PyResult<&Bound<'_, PyType>>, message: String) -> PyErr {
    match ty {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(err) => err,
    }
}

/// A ValueError-like [`Kind::Config`] error with `message`.
pub(crate) fn config_error(message: impl Into<String>) -> PyErr {
    Python::attach(|py| new_err(config_type(py), message.into()))
}

/// The most specific class for `err`: the first error in the chain (looking through transparent
/// wrappers) that has one.
pub(crate) fn kind_of(err: &(dyn StdError + 'static)) -> Kind {
    let mut current = Some(err);
    while let Some(err) = current {
        let kind = direct_kind(err);
        if kind != Kind::Other {
            return kind;
        }
        current = err.source();
    }
    Kind::Other
}

fn direct_kind(err: &(dyn StdError + 'static)) -> Kind {
    if let Some(e) = err.downcast_ref::<energon_cook::Error>() {
        return cook_kind(e);
    }
    if let Some(e) = err.downcast_ref::<energon_mix::Error>() {
        return mix_kind(e);
    }
    if let Some(e) = err.downcast_ref::<energon_reader::Error>() {
        return reader_kind(e);
    }
    if let Some(e) = err.downcast_ref::<energon_index::Error>() {
        return index_kind(e);
    }
    if err.downcast_ref::<energon_dist::Error>().is_some() {
        return Kind::Config;
    }
    if let Some(e) = err.downcast_ref::<io::Error>() {
        return io_kind(e);
    }
    Kind::Other
}

fn io_kind(err: &io::Error) -> Kind {
    match err.kind() {
        io::ErrorKind::NotFound => Kind::MissingFile,
        _ => Kind::Io,
    }
}

fn cook_kind(err: &energon_cook::Error) -> Kind {
    use energon_cook::Error as E;
    match err {
        E::Reader(e) => reader_kind(e),
        E::Mix(e) => mix_kind(e),
        E::Dist(_) | E::InvalidSetting { .. } => Kind::Config,
        E::ConfigMismatch { .. }
        | E::BadState { .. }
        | E::RestoreItem { .. }
        | E::NotSavable { .. }
        | E::CheckpointIo { .. }
        | E::CorruptCheckpoint { .. } => Kind::Checkpoint,
        E::IncompatibleCheckpoint { .. } => Kind::Incompatible,
        E::NothingToRepeat { .. }
        | E::AllDropped { .. }
        | E::WorkerPanicked { .. }
        | E::WorkerLost { .. }
        | E::Raised { .. }
        | E::Spawn { .. } => Kind::Loader,
        _ => Kind::Other,
    }
}

fn mix_kind(err: &energon_mix::Error) -> Kind {
    use energon_mix::Error as E;
    match err {
        E::Index(e) => index_kind(e),
        E::Reader(e) => reader_kind(e),
        E::Dist(_) => Kind::Config,
        E::JoinIndex { .. } => Kind::Corrupt,
        _ => Kind::Config,
    }
}

fn reader_kind(err: &energon_reader::Error) -> Kind {
    use energon_reader::Error as E;
    match err {
        E::Index(e) => index_kind(e),
        E::Io { source, .. } => io_kind(source),
        E::MissingShard { .. } => Kind::MissingFile,
        E::IndexMismatch { .. }
        | E::CorruptSample { .. }
        | E::Decode { .. }
        | E::TooLarge { .. }
        | E::ShardChanged { .. } => Kind::Corrupt,
        E::Field { .. } | E::Unsupported { .. } | E::OutOfRange { .. } => Kind::Config,
        E::NotFound { .. } => Kind::MissingFile,
        _ => Kind::Other,
    }
}

fn index_kind(err: &energon_index::Error) -> Kind {
    use energon_index::Error as E;
    match err {
        E::Io { source, .. } => io_kind(source),
        E::NotADataset { path, .. } if !path.exists() => Kind::MissingFile,
        E::Incompatible { .. } | E::NoSampleTables { .. } => Kind::Incompatible,
        E::CorruptTar { .. }
        | E::CorruptIndex { .. }
        | E::BadJsonl { .. }
        | E::BadMetadata { .. }
        | E::BadYaml { .. }
        | E::DuplicateKey { .. }
        | E::EmptyShard { .. }
        | E::CompressedTar { .. }
        | E::Sqlite { .. } => Kind::Corrupt,
        E::Config(_)
        | E::UnknownSplitPart { .. }
        | E::UnknownShard { .. }
        | E::EmptySplit { .. }
        | E::BadPattern { .. }
        | E::NotADataset { .. }
        | E::NotAFile { .. }
        | E::Join { .. } => Kind::Config,
        _ => Kind::Other,
    }
}
