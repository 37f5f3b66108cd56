//! Python task-encoder hooks called from the Rust pipeline: cookers and `encode_sample` on the
//! worker threads, `batch` and `encode_batch` on the loader's pump thread.
//!
//! Reading and decoding stay in Rust with the GIL released; a hook takes the GIL only for its own
//! call. The Python side (`energon_rs.task_encoder`) wraps each hook so that it applies the
//! reference's error policy (`SkipSample`, the error handler, the failure tolerance) and returns
//! a skip marker instead of raising for a sample that is to be dropped; an exception that comes
//! through is fatal and ends the iteration, re-raised as it was.

use std::{path::PathBuf, sync::Mutex};

use energon_cook::{Batch, Keyed};
use energon_mix::grammar::Joiner;
use energon_reader::{Sample, SourceInfo};
use pyo3::{
    prelude::*,
    types::{PyDict, PyList, PyTuple},
};
use serde_json::{Map, Value};

use crate::{
    convert::Converter,
    errors::{config_error, to_py_err},
    file_store::PyFileStore,
    sample::sample_to_py,
};

/// An item of the pipeline: a Rust sample until a Python hook has made something else of it.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "an item is made once and moved a few times; boxing would add an allocation"
)]
pub(crate) enum Item {
    /// A sample as read and decoded.
    Rust(Sample),
    /// What a Python hook returned.
    Py(Py<PyAny>),
}

/// The Python callables of a task encoder (each optional), with the skip marker they return.
#[derive(Debug, Default)]
pub(crate) struct Hooks {
    make_cook: Option<Py<PyAny>>,
    make_joiner: Option<Py<PyAny>>,
    on_error: Option<Py<PyAny>>,
    encode_sample: Option<Py<PyAny>>,
    batch: Option<Py<PyAny>>,
    default_batch: Option<Py<PyAny>>,
    encode_batch: Option<Py<PyAny>>,
    skip: Option<Py<PyAny>>,
    torch: bool,
    /// What describes the task encoder in a checkpoint's configuration (`key`, `value`).
    config: Vec<(String, String)>,
    /// The first exception a hook raised on a worker thread, re-raised by the loader.
    failure: Mutex<Option<PyErr>>,
}

impl Hooks {
    /// Reads the hooks from a Python object with the attributes `encode_sample`, `batch`,
    /// `encode_batch` (callables or `None`: not overridden), `default_batch` (batches items that
    /// hooks turned into Python objects when `batch` is not overridden), `make_cook` (picks a
    /// crude dataset's cooker: see [`Hooks::make_cook`]), `make_joiner` (see
    /// [`Hooks::make_joiner`]), `on_error` (see [`Hooks::report_sample_error`]), `skip` (the
    /// skip marker), `torch` and `config` (a list of `(key, value)` strings describing the
    /// task encoder in a checkpoint).
    pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let get = |name: &str| -> PyResult<Option<Py<PyAny>>> {
            let value = obj.getattr(name)?;
            Ok((!value.is_none()).then(|| value.unbind()))
        };
        Ok(Hooks {
            make_cook: get("make_cook")?,
            make_joiner: get("make_joiner")?,
            on_error: get("on_error")?,
            encode_sample: get("encode_sample")?,
            batch: get("batch")?,
            default_batch: get("default_batch")?,
            encode_batch: get("encode_batch")?,
            skip: get("skip")?,
            torch: obj.getattr("torch")?.extract()?,
            config: obj.getattr("config")?.extract()?,
            failure: Mutex::new(None),
        })
    }

    /// Whether tensors are handed to Python as torch tensors.
    pub(crate) fn torch(&self) -> bool {
        self.torch
    }

    /// The entries that describe the task encoder in a checkpoint's configuration.
    pub(crate) fn config(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    /// Whether `encode_sample` is overridden.
    pub(crate) fn has_encode_sample(&self) -> bool {
        self.encode_sample.is_some()
    }

    /// Whether batches go through Python (`batch` or `encode_batch` overridden).
    pub(crate) fn has_batch_hooks(&self) -> bool {
        self.batch.is_some() || self.encode_batch.is_some()
    }

    /// The cooking function of one crude dataset, chosen once as the reference's
    /// `build_cook_crude_sample` does: the first cooker matching the dataset's `subflavors`,
    /// given its auxiliary stores by name and, if it asks for it, its own files (`primary`: the
    /// dataset path and whether it is a JSONL file). `None` when the task encoder has no
    /// cookers (crude samples then stay as they are).
    pub(crate) fn make_cook(
        &self,
        py: Python<'_>,
        subflavors: Option<&Map<String, Value>>,
        aux: Vec<(String, PyFileStore)>,
        primary: (PathBuf, bool),
    ) -> PyResult<Option<Py<PyAny>>> {
        let Some(make_cook) = &self.make_cook else { return Ok(None) };
        let conv = Converter::new(py, self.torch)?;
        let subflavors = match subflavors {
            Some(map) => conv.json(Value::Object(map.clone()))?,
            None => py.None().into_bound(py),
        };
        let stores = PyDict::new(py);
        for (name, store) in aux {
            stores.set_item(name, Bound::new(py, store)?)?;
        }
        let (path, jsonl) = primary;
        let cook = make_cook.bind(py).call1((subflavors, stores, path, jsonl))?;
        Ok((!cook.is_none()).then(|| cook.unbind()))
    }

    /// The function that combines the samples of a join: called with the list of samples (one
    /// per joined dataset, `None` where one has no sample for the key) and the row's restore
    /// key; `names` are the datasets' names when the join is a mapping.
    pub(crate) fn make_joiner(
        &self,
        py: Python<'_>,
        joiner: Joiner,
        names: Option<Vec<String>>,
    ) -> PyResult<Py<PyAny>> {
        let Some(make_joiner) = &self.make_joiner else {
            return Err(config_error("joins need the joiner of the energon_rs package"));
        };
        let (kind, module, name) = match joiner {
            Joiner::Class { module, name } => ("class", module, name),
            Joiner::Function { module, name } => ("function", module, name),
        };
        Ok(make_joiner.bind(py).call1((kind, module, name, names))?.unbind())
    }

    /// The `encode_sample` stage.
    pub(crate) fn encode_sample(&self, item: Item) -> energon_cook::Result<Option<Item>> {
        self.call_sample_hook(self.encode_sample.as_ref(), item)
    }

    /// `hook` applied to an item (the identity without hook), with the GIL held for the call.
    pub(crate) fn call_sample_hook(
        &self,
        hook: Option<&Py<PyAny>>,
        item: Item,
    ) -> energon_cook::Result<Option<Item>> {
        let Some(hook) = hook else { return Ok(Some(item)) };
        Python::attach(|py| {
            let res = (|| -> PyResult<Option<Item>> {
                let conv = Converter::new(py, self.torch)?;
                let arg = item_to_py(&conv, item)?;
                let out = hook.bind(py).call1((arg,))?;
                Ok(self.unless_skip(&out).then(|| Item::Py(out.unbind())))
            })();
            res.map_err(|err| self.fail(err))
        })
    }

    /// Whether a hook's result is not the skip marker.
    pub(crate) fn unless_skip(&self, out: &Bound<'_, PyAny>) -> bool {
        self.skip.as_ref().is_none_or(|skip| !out.is(skip.bind(out.py())))
    }

    /// Hands the error of a sample that cannot be built (a part that cannot be decoded, a field
    /// the field map cannot fill) to the worker config's error handler, with the sample's
    /// source, before the sample is dropped. An exception of the handler (the reference's
    /// `reraise_exception`) stops the loader with it.
    pub(crate) fn report_sample_error(
        &self,
        err: &energon_cook::Error,
        source: SourceInfo,
    ) -> energon_cook::Result<()> {
        let Some(on_error) = &self.on_error else { return Ok(()) };
        Python::attach(|py| {
            let conv = Converter::new(py, self.torch)?;
            let exc = to_py_err(err).into_value(py);
            let sources = PyTuple::new(py, [conv.source_info(source)?])?;
            on_error.bind(py).call1((exc, sources))?;
            Ok(())
        })
        .map_err(|err| self.fail(err))
    }

    /// Keeps the first failure for the loader to re-raise, returning a Rust error that ends the
    /// worker's pipeline.
    pub(crate) fn fail(&self, err: PyErr) -> energon_cook::Error {
        let message = err.to_string();
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert(err);
        }
        energon_cook::Error::WorkerPanicked {
            worker: 0,
            message: format!("python hook: {message}"),
        }
    }

    /// The exception a hook raised, if any (taken once).
    pub(crate) fn take_failure(&self) -> Option<PyErr> {
        self.failure.lock().ok().and_then(|mut slot| slot.take())
    }

    /// `batch` then `encode_batch` over a batch of items, in Python; `None` when a hook skipped
    /// the batch.
    pub(crate) fn batch_py(
        &self,
        py: Python<'_>,
        batch: Keyed<Batch<Item>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let conv = Converter::new(py, self.torch)?;
        let list = PyList::empty(py);
        for keyed in batch.value.samples {
            list.append(item_to_py(&conv, keyed.value)?)?;
        }
        let mut out = match self.batch.as_ref().or(self.default_batch.as_ref()) {
            Some(batch) => batch.bind(py).call1((list,))?,
            None => list.into_any(),
        };
        if !self.unless_skip(&out) {
            return Ok(None);
        }
        if let Some(encode_batch) = &self.encode_batch {
            out = encode_batch.bind(py).call1((out,))?;
            if !self.unless_skip(&out) {
                return Ok(None);
            }
        }
        Ok(Some(out.unbind()))
    }
}

/// An item as a Python object (a Rust sample becomes its dataclass).
pub(crate) fn item_to_py<'py>(conv: &Converter<'py>, item: Item) -> PyResult<Bound<'py, PyAny>> {
    match item {
        Item::Rust(sample) => sample_to_py(conv, sample, None),
        Item::Py(obj) => Ok(obj.into_bound(conv.py())),
    }
}
