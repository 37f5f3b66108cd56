//! Python task-encoder hooks called from the Rust pipeline: cookers and `encode_sample` on the
//! worker threads, `batch` and `encode_batch` on the loader's pump thread.
//!
//! Reading and decoding stay in Rust with the GIL released; a hook takes the GIL only for its own
//! call. The Python side (`energon_rs.task_encoder`) wraps each hook so that it applies the
//! reference's error policy (`SkipSample`, the error handler, the failure tolerance) and returns
//! a skip marker instead of raising for a sample that is to be dropped; an exception that comes
//! through is fatal and ends the iteration, re-raised as it was.

use std::sync::Mutex;

use energon_cook::{Batch, Keyed};
use energon_reader::Sample;
use pyo3::{prelude::*, types::PyList};

use crate::{convert::Converter, sample::sample_to_py};

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
    cook: Option<Py<PyAny>>,
    encode_sample: Option<Py<PyAny>>,
    batch: Option<Py<PyAny>>,
    default_batch: Option<Py<PyAny>>,
    encode_batch: Option<Py<PyAny>>,
    skip: Option<Py<PyAny>>,
    torch: bool,
    /// The first exception a hook raised on a worker thread, re-raised by the loader.
    failure: Mutex<Option<PyErr>>,
}

impl Hooks {
    /// Reads the hooks from a Python object with the attributes `cook`, `encode_sample`,
    /// `batch`, `encode_batch` (callables or `None`: not overridden), `default_batch` (batches
    /// items that hooks turned into Python objects when `batch` is not overridden), `skip` (the
    /// skip marker) and `torch`.
    pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let get = |name: &str| -> PyResult<Option<Py<PyAny>>> {
            let value = obj.getattr(name)?;
            Ok((!value.is_none()).then(|| value.unbind()))
        };
        Ok(Hooks {
            cook: get("cook")?,
            encode_sample: get("encode_sample")?,
            batch: get("batch")?,
            default_batch: get("default_batch")?,
            encode_batch: get("encode_batch")?,
            skip: get("skip")?,
            torch: obj.getattr("torch")?.extract()?,
            failure: Mutex::new(None),
        })
    }

    /// Whether tensors are handed to Python as torch tensors.
    pub(crate) fn torch(&self) -> bool {
        self.torch
    }

    /// Whether `encode_sample` is overridden.
    pub(crate) fn has_encode_sample(&self) -> bool {
        self.encode_sample.is_some()
    }

    /// Whether batches go through Python (`batch` or `encode_batch` overridden).
    pub(crate) fn has_batch_hooks(&self) -> bool {
        self.batch.is_some() || self.encode_batch.is_some()
    }

    /// The cooking stage: the cooker applied to a crude sample (identity without cooker).
    pub(crate) fn cook(&self, item: Item) -> energon_cook::Result<Option<Item>> {
        self.call_sample_hook(self.cook.as_ref(), item)
    }

    /// The `encode_sample` stage.
    pub(crate) fn encode_sample(&self, item: Item) -> energon_cook::Result<Option<Item>> {
        self.call_sample_hook(self.encode_sample.as_ref(), item)
    }

    fn call_sample_hook(
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

    fn unless_skip(&self, out: &Bound<'_, PyAny>) -> bool {
        self.skip.as_ref().is_none_or(|skip| !out.is(skip.bind(out.py())))
    }

    /// Keeps the first failure for the loader to re-raise, returning a Rust error that ends the
    /// worker's pipeline.
    fn fail(&self, err: PyErr) -> energon_cook::Error {
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
