//! The native file store `_FileStore`: files by name from a prepared WebDataset
//! (`<key>.<part>`), a plain folder (relative paths) or a JSONL file (`<i>.json`), with the media
//! metadata `energon prepare-media` stored for them. The Python classes of `energon_rs.cache`
//! (`WebdatasetFileStore`, `SystemFileStore`, `JsonlFileStore`, `DecodeFileStore`) wrap it.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use energon_index::{INDEX_SQLITE, NV_META, sqlite::SqliteIndex};
use energon_mix::AuxSource;
use energon_reader::{
    DecodeFileStore, FileStore, JsonlFileStore, SystemFileStore, WebdatasetFileStore,
    media::{Metadata, media_metadata_of},
};
use pyo3::{prelude::*, types::PyDict};

use crate::{
    convert::{Converter, Output, pil_mode},
    dataset::decoder_of,
    errors::to_py_err,
};

/// Which kind of store, as the Python wrappers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Webdataset,
    System,
    Jsonl,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Webdataset => "webdataset",
            Kind::System => "system",
            Kind::Jsonl => "jsonl",
        }
    }
}

/// Files looked up by name; safe to share between threads (cookers run on the worker threads).
#[pyclass(name = "_FileStore", module = "energon_rs._native", frozen)]
pub(crate) struct PyFileStore {
    store: Arc<dyn FileStore>,
    kind: Kind,
}

impl PyFileStore {
    /// The store of an auxiliary source of a metadataset.
    pub(crate) fn of_aux(source: &AuxSource) -> PyResult<Self> {
        match source {
            AuxSource::Dataset(path) => Self::open(Kind::Webdataset, path),
            AuxSource::Folder(path) => Self::open(Kind::System, path),
        }
    }

    fn open(kind: Kind, path: &Path) -> PyResult<Self> {
        let store: Arc<dyn FileStore> = match kind {
            Kind::Webdataset => {
                Arc::new(WebdatasetFileStore::open(path).map_err(|e| to_py_err(&e))?)
            }
            Kind::System => Arc::new(SystemFileStore::new(path)),
            Kind::Jsonl => Arc::new(JsonlFileStore::open(path).map_err(|e| to_py_err(&e))?),
        };
        Ok(PyFileStore { store, kind })
    }
}

/// `Ok(None)` for a name the store does not have, the error otherwise.
fn found<T>(res: energon_reader::Result<T>) -> PyResult<Option<T>> {
    match res {
        Ok(value) => Ok(Some(value)),
        Err(energon_reader::Error::NotFound { .. }) => Ok(None),
        Err(err) => Err(to_py_err(&err)),
    }
}

#[pymethods]
impl PyFileStore {
    /// The members of the prepared WebDataset at `path`, by entry name `<key>.<part>`.
    #[staticmethod]
    fn webdataset(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        py.detach(|| Self::open(Kind::Webdataset, &path))
    }

    /// The files of the folder `path`, by path relative to it.
    #[staticmethod]
    fn system(path: PathBuf) -> PyResult<Self> {
        Self::open(Kind::System, &path)
    }

    /// The records of the JSONL file `path`, by `<i>.json` or `<i>`.
    #[staticmethod]
    fn jsonl(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        py.detach(|| Self::open(Kind::Jsonl, &path))
    }

    /// `webdataset`, `system` or `jsonl`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    /// The dataset folder, the folder or the JSONL file.
    #[getter]
    fn path(&self) -> String {
        self.store.path().to_string_lossy().into_owned()
    }

    /// The content of file `name` as a read-only `memoryview` (no copy) and its `SourceInfo`;
    /// `None` if the store has no such file.
    fn get<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let store = Arc::clone(&self.store);
        let Some((data, source)) = found(py.detach(|| store.get(name)))? else { return Ok(None) };
        let conv = Converter::new(py, Output::default())?;
        let pair = (conv.bytes(data)?, conv.source_info(source)?);
        Ok(Some(pair.into_pyobject(py)?.into_any()))
    }

    /// File `name` decoded by its part name (what follows the key), with its `SourceInfo`;
    /// `None` if the store has no such file.
    #[pyo3(signature = (
        name, image_decode = Some("torchrgb"), guess_content = false, torch = false,
        av_decode = "AVDecoder", video_decode_audio = false
    ))]
    #[expect(clippy::too_many_arguments, reason = "the Python API's keyword arguments")]
    fn get_decoded<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        image_decode: Option<&str>,
        guess_content: bool,
        torch: bool,
        av_decode: &str,
        video_decode_audio: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (decoder, av) = decoder_of(image_decode, guess_content, av_decode, video_decode_audio)?;
        let decoder = decoder.unwrap_or_default();
        let store = DecodeFileStore::new(Arc::clone(&self.store), decoder);
        let Some((value, source)) = found(py.detach(|| store.get_decoded(name)))? else {
            return Ok(None);
        };
        let pil_images = image_decode.is_some_and(|m| pil_mode(m).is_some());
        let conv = Converter::new(py, Output { torch, pil_images, av, ..Output::default() })?;
        conv.set_origin(format!("{}, file {name}", self.store.path().display()));
        let pair = (conv.decoded(value)?, conv.source_info(source)?);
        Ok(Some(pair.into_pyobject(py)?.into_any()))
    }

    /// The media metadata of file `name` as `energon_rs.media.ImageMetadata` or `AVMetadata`;
    /// `None` when none is stored for it (see `media_table`).
    fn media_metadata<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let store = Arc::clone(&self.store);
        let metadata = py.detach(|| media_metadata_of(&*store, name)).map_err(|e| to_py_err(&e))?;
        metadata.map(|m| metadata_to_py(py, m)).transpose()
    }

    /// Why the store has no media metadata at all (no `index.sqlite`, or no `media_metadata`
    /// table in it), or `None` when it has the table.
    fn media_table_missing(&self, py: Python<'_>) -> PyResult<Option<String>> {
        if self.kind == Kind::Jsonl {
            return Ok(Some("JSONL files have no media metadata".to_owned()));
        }
        let path = self.store.path().join(NV_META).join(INDEX_SQLITE);
        if !path.is_file() {
            return Ok(Some(format!("there is no media metadata database {}", path.display())));
        }
        let index = py.detach(|| SqliteIndex::open(&path)).map_err(|e| to_py_err(&e))?;
        Ok((!index.has_media_metadata())
            .then(|| format!("{} has no media_metadata table", path.display())))
    }

    fn __repr__(&self) -> String {
        format!("_FileStore({}, {:?})", self.kind.name(), self.store.path())
    }
}

/// Media metadata as the dataclasses of `energon_rs.media`, with the reference's field names.
fn metadata_to_py(py: Python<'_>, metadata: Metadata) -> PyResult<Bound<'_, PyAny>> {
    let media = py.import("energon_rs.media")?;
    let kwargs = PyDict::new(py);
    match metadata {
        Metadata::Image(m) => {
            kwargs.set_item("width", m.width)?;
            kwargs.set_item("height", m.height)?;
            kwargs.set_item("format", m.format)?;
            kwargs.set_item("mode", m.mode)?;
            media.getattr("ImageMetadata")?.call((), Some(&kwargs))
        }
        Metadata::Av(m) => {
            kwargs.set_item("video_duration", m.video_duration)?;
            kwargs.set_item("video_num_frames", m.video_num_frames)?;
            kwargs.set_item("video_fps", m.video_fps)?;
            kwargs.set_item("video_width", m.video_width)?;
            kwargs.set_item("video_height", m.video_height)?;
            kwargs.set_item("audio_duration", m.audio_duration)?;
            kwargs.set_item("audio_channels", m.audio_channels)?;
            kwargs.set_item("audio_sample_rate", m.audio_sample_rate)?;
            kwargs.set_item("audio_num_samples", m.audio_num_samples)?;
            media.getattr("AVMetadata")?.call((), Some(&kwargs))
        }
    }
}
