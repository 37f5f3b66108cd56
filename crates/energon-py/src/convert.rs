//! Rust values as Python objects: tensors as numpy arrays that take over the Rust buffer, raw
//! parts as `memoryview`s, JSON as Python values, samples as the dataclasses of
//! `energon_rs.sample`.
//!
//! Which conversions copy: none for tensors (the `Vec` moves into numpy) and raw bytes (a view);
//! strings and JSON are built as Python objects (a copy, as they must be).

use std::cell::RefCell;

use bytes::Bytes;
use energon_cook::{KeyPart, RestoreKey};
use energon_index::dataset_config::ClassRef;
use energon_reader::{
    Decoded, SampleMeta, SourceIndex, SourceInfo, Tensor,
    decode::{Audio, AvDecode, TensorData, Video},
    sample::Field,
};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::{
    prelude::*,
    sync::PyOnceLock,
    types::{PyDict, PyList, PyModule, PyTuple},
};
use serde_json::Value;

use crate::buffer::Buffer;

static SAMPLE_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
static FROM_NUMPY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static GENERIC_BATCH: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static PIL_FROM_ARRAY: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static AV_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The fields of the sample types that hold decoded images (a list of them for `images`).
const IMAGE_FIELDS: [&str; 2] = ["image", "images"];

/// How a loader hands values to Python.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Output {
    /// Tensors as `torch.Tensor`s (sharing the Rust buffers) instead of numpy arrays.
    pub(crate) torch: bool,
    /// Decoded images as `PIL.Image.Image`s (the reference's `pil*` decode modes).
    pub(crate) pil_images: bool,
    /// What audio and video parts kept as bytes become.
    pub(crate) av: AvOutput,
    /// A batch's `__subflavors__` as one dict of lists (the reference's `generic_batch`, which
    /// a plain `TaskEncoder` batches with), not one dict per sample (`DefaultTaskEncoder`'s).
    pub(crate) subflavors_by_key: bool,
}

impl Output {
    /// numpy arrays, or torch tensors with `torch`; images as arrays.
    pub(crate) fn tensors(torch: bool) -> Self {
        Output { torch, ..Output::default() }
    }
}

/// What an audio or video part that the Rust decoder kept as bytes becomes in Python (the
/// reference's `av_decode`; its `torch` mode decodes in Rust, see [`av_decode_of`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum AvOutput {
    /// An `energon_rs.av.AVDecoder` over the part (a `RawVideo` in a wheel without `video`).
    #[default]
    Decoder,
    /// A PyAV container (`av.open` over the bytes).
    PyAv,
}

/// The Rust decoding and Python output of an `av_decode` name (`AVDecoder`, `torch` or `pyav`,
/// the reference's) with its `video_decode_audio`.
pub(crate) fn av_decode_of(
    av_decode: &str,
    video_decode_audio: bool,
) -> Result<(AvDecode, AvOutput), String> {
    match av_decode {
        "AVDecoder" => Ok((AvDecode::Raw, AvOutput::Decoder)),
        "pyav" => Ok((AvDecode::Raw, AvOutput::PyAv)),
        "torch" => Ok((AvDecode::Frames { with_audio: video_decode_audio }, AvOutput::Decoder)),
        other => Err(format!("av_decode must be 'AVDecoder', 'torch' or 'pyav', not {other:?}")),
    }
}

/// The name of a sample's media part in errors: dataset, shard, key.
pub(crate) fn origin_of(meta: &SampleMeta) -> String {
    match meta.sources.first() {
        Some(s) => format!(
            "dataset {}, shard {}, key {}",
            s.dataset_path.display(),
            s.shard_name,
            meta.key
        ),
        None => format!("key {}", meta.key),
    }
}

/// Whether an `image_decode` name is one of the reference's `pil*` modes, and the array mode it
/// is decoded in before it becomes a PIL image.
pub(crate) fn pil_mode(image_decode: &str) -> Option<&'static str> {
    // COMPAT(energon 7.4.1): webdataset's imagehandler converts `pil` to RGB, as `pilrgb`.
    match image_decode {
        "pil" | "pilrgb" => Some("rgb8"),
        "pill" => Some("l8"),
        "pilrgba" => Some("rgba8"),
        _ => None,
    }
}

/// Whether field `name` holds PIL images for a loader with `output` (so batches list them, as
/// the reference's default batching does with values it cannot stack).
pub(crate) fn is_pil_image_field(output: Output, name: &str) -> bool {
    output.pil_images && IMAGE_FIELDS.contains(&name)
}

/// Converts values for one loader: numpy arrays, or torch tensors sharing their memory.
pub(crate) struct Converter<'py> {
    py: Python<'py>,
    classes: Bound<'py, PyModule>,
    from_numpy: Option<Bound<'py, PyAny>>,
    pil_from_array: Option<Bound<'py, PyAny>>,
    av: AvOutput,
    subflavors_by_key: bool,
    /// Where the values being converted come from (dataset, shard, key), for the errors of
    /// the media decoders made from them.
    origin: RefCell<String>,
}

impl std::fmt::Debug for Converter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Converter").field("torch", &self.from_numpy.is_some()).finish()
    }
}

impl<'py> Converter<'py> {
    /// A converter; with `output.torch`, tensors become `torch.Tensor`s (`torch.from_numpy`, no
    /// copy); with `output.pil_images`, decoded images become PIL images.
    pub(crate) fn new(py: Python<'py>, output: Output) -> PyResult<Self> {
        let Output { torch, pil_images, av, subflavors_by_key } = output;
        let classes = SAMPLE_MODULE
            .get_or_try_init(py, || Ok::<_, PyErr>(py.import("energon_rs.sample")?.unbind()))?
            .bind(py)
            .clone();
        let from_numpy = if torch {
            let f = FROM_NUMPY.get_or_try_init(py, || {
                Ok::<_, PyErr>(py.import("torch")?.getattr("from_numpy")?.unbind())
            })?;
            Some(f.bind(py).clone())
        } else {
            None
        };
        let pil_from_array = if pil_images {
            let f = PIL_FROM_ARRAY.get_or_try_init(py, || {
                Ok::<_, PyErr>(py.import("PIL.Image")?.getattr("fromarray")?.unbind())
            })?;
            Some(f.bind(py).clone())
        } else {
            None
        };
        Ok(Converter {
            py,
            classes,
            from_numpy,
            pil_from_array,
            av,
            subflavors_by_key,
            origin: RefCell::default(),
        })
    }

    /// Sets where the next values come from (see [`origin_of`]).
    pub(crate) fn set_origin(&self, origin: String) {
        *self.origin.borrow_mut() = origin;
    }

    /// The module `energon_rs.av`.
    fn av_module(&self) -> PyResult<Bound<'py, PyModule>> {
        let py = self.py;
        Ok(AV_MODULE
            .get_or_try_init(py, || Ok::<_, PyErr>(py.import("energon_rs.av")?.unbind()))?
            .bind(py)
            .clone())
    }

    /// A batch's `__subflavors__` from one dict per sample: the list as it is, or one dict of
    /// lists (`generic_batch`) where the loader's task encoder batches so or the samples are
    /// crude dicts (the reference's rules).
    pub(crate) fn batch_subflavors(
        &self,
        per_sample: Bound<'py, PyList>,
        crude: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        if !(self.subflavors_by_key || crude) || per_sample.is_empty() {
            return Ok(per_sample.into_any());
        }
        let py = self.py;
        let generic_batch = GENERIC_BATCH.get_or_try_init(py, || {
            Ok::<_, PyErr>(py.import("energon_rs.task_encoder")?.getattr("generic_batch")?.unbind())
        })?;
        generic_batch.bind(py).call1((per_sample,))
    }

    /// The interpreter.
    pub(crate) fn py(&self) -> Python<'py> {
        self.py
    }

    /// The class `name` of `energon_rs.sample`.
    pub(crate) fn class(&self, name: &str) -> PyResult<Bound<'py, PyAny>> {
        self.classes.getattr(name)
    }

    /// The class a `dataset.yaml` names (`megatron.energon`'s are energon_rs's), imported.
    pub(crate) fn named_class(&self, class: &ClassRef) -> PyResult<Bound<'py, PyAny>> {
        if matches!(class.module.as_str(), "megatron.energon" | "energon_rs") {
            return self.class(&class.class);
        }
        self.py.import(class.module.as_str())?.getattr(class.class.as_str())
    }

    /// A tensor as a numpy array owning the Rust buffer (or a torch tensor over it).
    pub(crate) fn tensor(&self, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
        let array = self.array(tensor)?;
        match &self.from_numpy {
            Some(from_numpy) => from_numpy.call1((array,)),
            None => Ok(array),
        }
    }

    /// A decoded image: a PIL image when the loader asks for them, else a tensor.
    pub(crate) fn image(&self, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
        match &self.pil_from_array {
            // The array has the decoded mode's layout: HW (L), HWC RGB or RGBA.
            Some(from_array) => from_array.call1((self.array(tensor)?,)),
            None => self.tensor(tensor),
        }
    }

    /// A field of a sample or batch: decoded images become PIL images when the loader asks
    /// for them.
    pub(crate) fn named_field(&self, name: &str, field: Field) -> PyResult<Bound<'py, PyAny>> {
        if self.pil_from_array.is_none() || !IMAGE_FIELDS.contains(&name) {
            return self.field(field);
        }
        match field {
            Field::Tensor(t) => self.image(t),
            Field::Tensors(v) => {
                let list = PyList::empty(self.py);
                for t in v {
                    list.append(self.image(t)?)?;
                }
                Ok(list.into_any())
            }
            other => self.field(other),
        }
    }

    /// A tensor as a numpy array owning the Rust buffer.
    fn array(&self, tensor: Tensor) -> PyResult<Bound<'py, PyAny>> {
        numpy_array(self.py, tensor)
    }

    /// Raw bytes as a read-only `memoryview` (no copy).
    pub(crate) fn bytes(&self, data: Bytes) -> PyResult<Bound<'py, PyAny>> {
        Buffer::memoryview(self.py, data)
    }

    /// A decoded part.
    pub(crate) fn decoded(&self, value: Decoded) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match value {
            Decoded::Image(t) => self.image(t)?,
            Decoded::Tensor(t) => self.tensor(t)?,
            Decoded::Text(s) => s.into_pyobject(py)?.into_any(),
            Decoded::Json(v) => self.json(v)?,
            Decoded::Int(i) => i.into_pyobject(py)?.into_any(),
            Decoded::Audio(a) => self.audio(a)?,
            Decoded::Video(v) => self.video(v)?,
            #[cfg(feature = "video")]
            Decoded::Av(av) => self.av_data(av)?,
            Decoded::Bytes(b) => self.bytes(b)?,
            _ => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "decoded value not supported by energon_rs",
                ));
            }
        })
    }

    fn audio(&self, audio: Audio) -> PyResult<Bound<'py, PyAny>> {
        let samples = self.tensor(audio.samples)?;
        self.class("AudioData")?.call1((samples, audio.sample_rate))
    }

    /// An audio or video part kept as bytes: an `AVDecoder` over it (the reference's default
    /// `av_decode`), a PyAV container, or a `RawVideo` in a wheel without video decoding. `ogg`
    /// is not on the reference's AV list: its bytes.
    fn video(&self, video: Video) -> PyResult<Bound<'py, PyAny>> {
        if video.format == "ogg" {
            return self.bytes(video.data);
        }
        match self.av {
            AvOutput::PyAv => {
                let data = self.bytes(video.data)?;
                self.av_module()?.getattr("_pyav_open")?.call1((data,))
            }
            #[cfg(feature = "video")]
            AvOutput::Decoder => {
                let origin = format!("{} ({})", self.origin.borrow(), video.format);
                let native = crate::av::PyAvDecoder::over(video.data, origin);
                let native = Bound::new(self.py, native)?;
                self.av_module()?.getattr("AVDecoder")?.call_method1("_from_native", (native,))
            }
            #[cfg(not(feature = "video"))]
            AvOutput::Decoder => {
                let data = self.bytes(video.data)?;
                self.class("RawVideo")?.call1((video.format, data))
            }
        }
    }

    /// Audio and video decoded in Rust: the reference's `AVData` (torch tensors, video clips
    /// as the `(frames, 3, height, width)` view), or `None`.
    #[cfg(feature = "video")]
    fn av_data(&self, av: Option<energon_reader::av::AvData>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let Some(av) = av else { return Ok(py.None().into_bound(py)) };
        let (video, video_ts) = crate::av::video_arrays(py, av.video_clips)?;
        let (audio, audio_ts) = crate::av::audio_arrays(py, av.audio_clips)?;
        self.av_module()?.getattr("_av_data")?.call1((video, video_ts, audio, audio_ts))
    }

    /// A JSON value as `None`, `bool`, `int`, `float`, `str`, `list` or `dict` (key order kept).
    pub(crate) fn json(&self, value: Value) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match value {
            Value::Null => py.None().into_bound(py),
            Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    i.into_pyobject(py)?.into_any()
                } else if let Some(u) = n.as_u64() {
                    u.into_pyobject(py)?.into_any()
                } else {
                    n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
                }
            }
            Value::String(s) => s.into_pyobject(py)?.into_any(),
            Value::Array(items) => {
                let list = PyList::empty(py);
                for item in items {
                    list.append(self.json(item)?)?;
                }
                list.into_any()
            }
            Value::Object(map) => {
                let dict = PyDict::new(py);
                for (k, v) in map {
                    dict.set_item(k, self.json(v)?)?;
                }
                dict.into_any()
            }
        })
    }

    /// A typed field of a sample.
    pub(crate) fn field(&self, field: Field) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match field {
            Field::None => py.None().into_bound(py),
            Field::Tensor(t) => self.tensor(t)?,
            Field::Text(s) => s.into_pyobject(py)?.into_any(),
            Field::Int(i) => i.into_pyobject(py)?.into_any(),
            Field::Texts(v) => PyList::new(py, v)?.into_any(),
            Field::Ints(v) => PyList::new(py, v)?.into_any(),
            Field::Tensors(v) => {
                let list = PyList::empty(py);
                for t in v {
                    list.append(self.tensor(t)?)?;
                }
                list.into_any()
            }
            Field::Video(v) => self.video(v)?,
            Field::Decoded(d) => self.decoded(d)?,
            Field::List(v) => {
                let list = PyList::empty(py);
                for d in v {
                    list.append(self.decoded(d)?)?;
                }
                list.into_any()
            }
            _ => {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "field value not supported by energon_rs",
                ));
            }
        })
    }

    /// A restore key as a tuple (`("Webdataset", 12)`, nested tuples for batches).
    pub(crate) fn restore_key(&self, key: &RestoreKey) -> PyResult<Bound<'py, PyTuple>> {
        let py = self.py;
        let mut items = Vec::with_capacity(key.parts().len());
        for part in key.parts() {
            items.push(match part {
                KeyPart::Name(n) => n.as_ref().into_pyobject(py)?.into_any(),
                KeyPart::Index(i) => i.into_pyobject(py)?.into_any(),
                KeyPart::Key(k) => self.restore_key(k)?.into_any(),
            });
        }
        PyTuple::new(py, items)
    }

    /// A `SourceInfo` dataclass.
    pub(crate) fn source_info(&self, source: SourceInfo) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let index = match source.index {
            SourceIndex::Index(i) => i.into_pyobject(py)?.into_any(),
            SourceIndex::Name(n) => n.into_pyobject(py)?.into_any(),
        };
        let path = source.dataset_path.to_string_lossy().into_owned();
        let names = PyTuple::new(py, source.file_names)?;
        self.class("SourceInfo")?.call1((path, index, source.shard_name.as_ref(), names))
    }

    /// Sets `__key__`, `__restore_key__`, `__subflavors__` and `__sources__` in `kwargs`; the
    /// restore key is the loader's (`key`) where known, else the sample's own.
    pub(crate) fn meta_into(
        &self,
        meta: SampleMeta,
        key: Option<&RestoreKey>,
        kwargs: &Bound<'py, PyDict>,
    ) -> PyResult<()> {
        let py = self.py;
        kwargs.set_item("__subflavors__", self.subflavors(&meta)?)?;
        kwargs.set_item("__key__", meta.key)?;
        let restore_key = match key {
            Some(key) => self.restore_key(key)?,
            None => PyTuple::new(
                py,
                [
                    meta.restore_key.0.into_pyobject(py)?.into_any(),
                    meta.restore_key.1.into_pyobject(py)?.into_any(),
                ],
            )?,
        };
        kwargs.set_item("__restore_key__", restore_key)?;
        let sources = PyList::empty(py);
        for source in meta.sources {
            sources.append(self.source_info(source)?)?;
        }
        kwargs.set_item("__sources__", PyTuple::new(py, sources)?)?;
        Ok(())
    }

    /// The subflavors of a sample as a `dict`, or `None`.
    pub(crate) fn subflavors(&self, meta: &SampleMeta) -> PyResult<Bound<'py, PyAny>> {
        match &meta.subflavors {
            Some(map) => self.json(Value::Object(map.as_ref().clone())),
            None => Ok(self.py.None().into_bound(self.py)),
        }
    }
}

/// A restore key from its Python tuple (names, non-negative integers and nested tuples, as the
/// loader's items carry it).
pub(crate) fn key_from_py(obj: &Bound<'_, PyAny>) -> PyResult<RestoreKey> {
    let bad = || {
        pyo3::exceptions::PyTypeError::new_err(format!(
            "a restore key is a tuple of strings, non-negative integers and tuples, not {obj}"
        ))
    };
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Err(bad());
    }
    let mut parts = Vec::new();
    for part in obj.try_iter().map_err(|_| bad())? {
        let part = part?;
        parts.push(if let Ok(name) = part.extract::<String>() {
            KeyPart::Name(name.into())
        } else if part.is_instance_of::<pyo3::types::PyInt>() {
            KeyPart::Index(part.extract::<u64>().map_err(|_| bad())?)
        } else {
            KeyPart::Key(key_from_py(&part)?)
        });
    }
    Ok(RestoreKey::from_parts(parts))
}

/// A tensor as a numpy array owning the Rust buffer.
pub(crate) fn numpy_array(py: Python<'_>, tensor: Tensor) -> PyResult<Bound<'_, PyAny>> {
    let Tensor { shape, data } = tensor;

    macro_rules! array {
        ($v:expr) => {
            PyArray1::from_vec(py, $v).reshape(shape)?.into_any()
        };
    }
    let array = match data {
        TensorData::Bool(v) => array!(v),
        TensorData::U8(v) => array!(v),
        TensorData::I8(v) => array!(v),
        TensorData::U16(v) => array!(v),
        TensorData::I16(v) => array!(v),
        TensorData::U32(v) => array!(v),
        TensorData::I32(v) => array!(v),
        TensorData::U64(v) => array!(v),
        TensorData::I64(v) => array!(v),
        // Half floats travel as their bit patterns and are reinterpreted (a view).
        TensorData::F16(v) => array!(v).call_method1("view", ("float16",))?,
        TensorData::F32(v) => array!(v),
        TensorData::F64(v) => array!(v),
        _ => {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "tensor element type not supported by energon_rs",
            ));
        }
    };
    Ok(array)
}
