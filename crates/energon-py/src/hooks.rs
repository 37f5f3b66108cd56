//! Python task-encoder hooks called from the Rust pipeline, on the worker threads: cookers,
//! `encode_sample`, packing, `batch` and `encode_batch`.
//!
//! Reading and decoding stay in Rust with the GIL released; a hook takes the GIL only for its own
//! call. Hooks raise: the error rules of the hook set classify an exception (skip, failure,
//! fatal; see the contract module) and energon-cook's error policy counts the failures; an
//! exception that ends the loader is raised again, as it was, where the loader is iterated.

use std::{path::PathBuf, sync::Arc};

use energon_cook::{
    Batch, ErrorPolicy, Generator, HookError, HookResult, Keyed, Outputs, SampleContext,
};
use energon_mix::grammar::Joiner;
use energon_reader::{Sample, SourceInfo};
use pyo3::{
    prelude::*,
    types::{PyDict, PyList, PyTuple},
};
use serde_json::{Map, Value};

use crate::{
    contract::{Errors, HookSet},
    convert::{AvOutput, Converter, Output},
    encoder::call_context,
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

/// The dataset a crude leaf reads, as its cooker may need it: its path, whether it is a JSONL
/// file, and the config file naming its `sample_loader` (`None`: `dataset.yaml`).
pub(crate) struct Primary {
    pub(crate) path: PathBuf,
    pub(crate) jsonl: bool,
    pub(crate) dataset_config: Option<String>,
}

/// The Python callables of a task encoder (a `_HookSet`, `None` without Python hooks), with how
/// values are handed to them and the error rules that classify their exceptions.
#[derive(Debug, Default)]
pub(crate) struct Hooks {
    set: Option<Py<HookSet>>,
    output: Output,
    /// How exceptions are classified, and the first one that ends the loader.
    errors: Errors,
}

/// A Python generator hook's outputs, made one at a time when the stage pulls them: the Python
/// side's lazy wrapper sets the call's context for each sample.
struct PyGenerator {
    lazy: Py<PyAny>,
    errors: Errors,
}

impl Generator<Py<PyAny>> for PyGenerator {
    fn next(&mut self, ctx: &SampleContext) -> HookResult<Option<Py<PyAny>>> {
        Python::attach(|py| {
            let lazy = self.lazy.bind(py);
            let out = match lazy.call_method1("pull", (call_context(ctx),)) {
                Ok(out) => out,
                Err(err) => {
                    let value = lazy.getattr("value").ok();
                    return Err(self.errors.classify(py, err, lazy, value.as_ref()));
                }
            };
            if out.is_none() {
                return Ok(None);
            }
            match out.extract::<(Bound<'_, PyAny>,)>() {
                Ok((value,)) => Ok(Some(value.unbind())),
                Err(err) => Err(self.errors.fatal(err)),
            }
        })
    }
}

/// Why a call under the GIL made nothing: what the error policy made of a hook's exception, or a
/// failure between Python and Rust (a conversion), which ends the loader.
enum Stop {
    Hook(HookError),
    Py(PyErr),
}

impl From<PyErr> for Stop {
    fn from(err: PyErr) -> Self {
        Stop::Py(err)
    }
}

impl Hooks {
    /// The hooks of a `_HookSet` (see [`HookSet`]).
    pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let set = obj.cast::<HookSet>()?;
        let output = Output {
            subflavors_by_key: set.get().subflavors_by_key,
            ..Output::tensors(set.get().torch)
        };
        let rules = Arc::clone(&set.get().rules);
        Ok(Hooks { set: Some(set.clone().unbind()), output, errors: Errors::new(rules) })
    }

    /// The hook that `pick` names, if the task encoder overrides it.
    fn hook(&self, pick: fn(&HookSet) -> &Option<Py<PyAny>>) -> Option<&Py<PyAny>> {
        self.set.as_ref().and_then(|set| pick(set.get()).as_ref())
    }

    /// The error policy of the pipeline (the hooks' failure tolerances).
    pub(crate) fn error_policy(&self) -> ErrorPolicy {
        self.set.as_ref().map(|set| set.get().policy.clone()).unwrap_or_default()
    }

    /// How values are handed to Python.
    pub(crate) fn output(&self) -> Output {
        self.output
    }

    /// Hands decoded images to Python as PIL images (the reference's `pil*` decode modes).
    pub(crate) fn set_pil_images(&mut self, pil_images: bool) {
        self.output.pil_images = pil_images;
    }

    /// What audio and video parts kept as bytes become (the `av_decode` setting).
    pub(crate) fn set_av_output(&mut self, av: AvOutput) {
        self.output.av = av;
    }

    /// The entries that describe the task encoder in a checkpoint's configuration.
    pub(crate) fn config(&self) -> Vec<(String, String)> {
        self.set.as_ref().map(|set| set.get().config.clone()).unwrap_or_default()
    }

    /// Whether `batch_group_criterion` is overridden (batches are then made by group).
    pub(crate) fn has_group_criterion(&self) -> bool {
        self.hook(|s| &s.batch_group_criterion).is_some()
    }

    /// The optional hooks that add stages (besides `encode_sample` and `encode_batch`, which
    /// the default task encoder has too).
    pub(crate) fn declared(&self) -> energon_cook::Hooks {
        let preencode = self.hook(|s| &s.preencode_sample).is_some();
        energon_cook::Hooks {
            encode_sample: !preencode,
            preencode_sample: preencode,
            postencode_sample: self.hook(|s| &s.postencode_sample).is_some(),
            packing: self.hook(|s| &s.select_samples_to_pack).is_some()
                && self.hook(|s| &s.pack_selected_samples).is_some(),
            batch_group_criterion: self.has_group_criterion(),
            encode_batch: true,
        }
    }

    /// Calls `hook` on `arg` with the call's context as the keyword `ctx`:
    /// `(current_sample_index, current_batch_index, worker_seed)`, which the Python side makes
    /// the task encoder's `current_sample_index` and `current_batch_index` and from which
    /// `@stateless(restore_seeds=True)` seeds the global random generators. An exception is
    /// classified by the error rules (the input is the sample the error handler sees).
    fn invoke<'py>(
        &self,
        hook: &Py<PyAny>,
        arg: Bound<'py, PyAny>,
        ctx: &SampleContext,
    ) -> Result<Bound<'py, PyAny>, Stop> {
        let py = arg.py();
        let kwargs = PyDict::new(py);
        kwargs.set_item("ctx", call_context(ctx))?;
        let hook = hook.bind(py);
        hook.call((&arg,), Some(&kwargs))
            .map_err(|err| Stop::Hook(self.errors.classify(py, err, hook, Some(&arg))))
    }

    /// A hook's result as outputs: a generator hook's are pulled lazily.
    fn outputs(&self, out: Bound<'_, PyAny>) -> PyResult<Outputs<Item>> {
        Ok(self.py_outputs(out)?.map(Item::Py))
    }

    /// A hook's result as Python objects: a generator hook's are pulled lazily.
    fn py_outputs(&self, out: Bound<'_, PyAny>) -> PyResult<Outputs<Py<PyAny>>> {
        if let Some(lazy) = self.set.as_ref().and_then(|set| set.get().lazy.as_ref())
            && out.is_instance(lazy.bind(out.py()))?
        {
            return Ok(Outputs::Lazy(Box::new(PyGenerator {
                lazy: out.unbind(),
                errors: self.errors.clone(),
            })));
        }
        Ok(Outputs::One(out.unbind()))
    }

    /// Runs `f` with the GIL: a hook's exception is what the error rules made of it; a failure
    /// between Python and Rust ends the loader.
    fn with_gil<R>(
        &self,
        f: impl for<'py> FnOnce(Converter<'py>) -> Result<R, Stop>,
    ) -> HookResult<R> {
        Python::attach(|py| match Converter::new(py, self.output).map_err(Stop::Py).and_then(f) {
            Ok(value) => Ok(value),
            Err(Stop::Hook(err)) => Err(err),
            Err(Stop::Py(err)) => Err(self.errors.fatal(err)),
        })
    }

    /// The `encode_sample` stage (or `preencode_sample`, when that is overridden).
    pub(crate) fn encode_sample(
        &self,
        item: Item,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Item>> {
        let hook = self.hook(|s| &s.preencode_sample).or(self.hook(|s| &s.encode_sample));
        self.call_sample_hook(hook, item, ctx)
    }

    /// `postencode_sample` on one sample (of a pack, or alone).
    pub(crate) fn postencode_sample(&self, item: Item, ctx: &SampleContext) -> HookResult<Item> {
        match self.call_sample_hook(self.hook(|s| &s.postencode_sample), item, ctx)? {
            Outputs::One(item) => Ok(item),
            Outputs::Many(_) | Outputs::Lazy(_) => {
                Err(HookError::fatal_msg("postencode_sample cannot be a generator"))
            }
        }
    }

    /// `hook` applied to an item (the identity without hook), with the GIL held for the call; a
    /// generator hook's outputs come back as many.
    pub(crate) fn call_sample_hook(
        &self,
        hook: Option<&Py<PyAny>>,
        item: Item,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Item>> {
        let Some(hook) = hook else { return Ok(Outputs::One(item)) };
        self.with_gil(|conv| {
            let arg = item_to_py(&conv, item)?;
            Ok(self.outputs(self.invoke(hook, arg, ctx)?)?)
        })
    }

    /// The group of an item and the group's batch size (`None`: the loader's), from the Python
    /// `batch_group_criterion`; the group is the `repr` of what the hook returned.
    pub(crate) fn batch_group_criterion(
        &self,
        item: &Item,
        ctx: &SampleContext,
    ) -> HookResult<(String, Option<usize>)> {
        let Some(hook) = self.hook(|s| &s.batch_group_criterion) else {
            return Err(HookError::fatal_msg("batch_group_criterion is not overridden"));
        };
        self.with_gil(|conv| {
            let out = self.invoke(hook, item_ref_to_py(&conv, item)?, ctx)?;
            let (group, size): (Bound<'_, PyAny>, Option<usize>) = out.extract()?;
            Ok((group.repr()?.to_string(), size))
        })
    }

    /// The packs of a full packing buffer, as positions in it: the Python
    /// `select_samples_to_pack` returns the samples of each pack, found again by identity.
    pub(crate) fn select_samples_to_pack(
        &self,
        items: &[Keyed<Item>],
        ctx: &SampleContext,
    ) -> HookResult<Vec<Vec<usize>>> {
        let Some(hook) = self.hook(|s| &s.select_samples_to_pack) else {
            return Err(HookError::fatal_msg("select_samples_to_pack is not overridden"));
        };
        self.with_gil(|conv| {
            let samples = items
                .iter()
                .map(|i| item_ref_to_py(&conv, &i.value))
                .collect::<PyResult<Vec<_>>>()?;
            // The hook may sort or empty the list it gets (the packing guide's does): samples
            // are found again in a list of our own.
            let out = self.invoke(hook, PyList::new(conv.py(), &samples)?.into_any(), ctx)?;
            let position = |sample: &Bound<'_, PyAny>| -> PyResult<usize> {
                for (i, candidate) in samples.iter().enumerate() {
                    if candidate.is(sample) {
                        return Ok(i);
                    }
                }
                Err(pyo3::exceptions::PyValueError::new_err(
                    "select_samples_to_pack returned a sample that is not in the buffer",
                ))
            };
            let mut packs = Vec::new();
            for pack in out.try_iter()? {
                packs.push(pack?.try_iter()?.map(|s| position(&s?)).collect::<PyResult<_>>()?);
            }
            Ok(packs)
        })
    }

    /// The Python `pack_selected_samples` on the samples of one pack.
    pub(crate) fn pack_selected_samples(
        &self,
        items: Vec<Keyed<Item>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Item>> {
        let Some(hook) = self.hook(|s| &s.pack_selected_samples) else {
            return Err(HookError::fatal_msg("pack_selected_samples is not overridden"));
        };
        self.with_gil(|conv| {
            let list = PyList::empty(conv.py());
            for item in items {
                list.append(item_to_py(&conv, item.value)?)?;
            }
            Ok(self.outputs(self.invoke(hook, list.into_any(), ctx)?)?)
        })
    }

    /// Whether batches go through Python (`batch` or `encode_batch` overridden).
    pub(crate) fn has_batch_hooks(&self) -> bool {
        self.hook(|s| &s.batch).is_some() || self.hook(|s| &s.encode_batch).is_some()
    }

    /// The cooking function of one crude dataset, chosen once as the reference's
    /// `build_cook_crude_sample` does: the first cooker matching the dataset's `subflavors`,
    /// given its auxiliary stores by name and, if it asks for it, its own files (`primary`).
    /// A dataset whose config names a `sample_loader` is cooked by that function. `None` when
    /// neither applies (crude samples then stay as they are).
    pub(crate) fn make_cook(
        &self,
        py: Python<'_>,
        subflavors: Option<&Map<String, Value>>,
        aux: Vec<(String, PyFileStore)>,
        primary: Primary,
    ) -> PyResult<Option<Py<PyAny>>> {
        let Some(make_cook) = self.hook(|s| &s.make_cook) else { return Ok(None) };
        let conv = Converter::new(py, self.output)?;
        let subflavors = match subflavors {
            Some(map) => conv.json(Value::Object(map.clone()))?,
            None => py.None().into_bound(py),
        };
        let stores = PyDict::new(py);
        for (name, store) in aux {
            stores.set_item(name, Bound::new(py, store)?)?;
        }
        let Primary { path, jsonl, dataset_config } = primary;
        let cook = make_cook.bind(py).call1((subflavors, stores, path, jsonl, dataset_config))?;
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
        let Some(make_joiner) = self.hook(|s| &s.make_joiner) else {
            return Err(config_error("joins need the joiner of the energon_rs package"));
        };
        let (kind, module, name) = match joiner {
            Joiner::Class { module, name } => ("class", module, name),
            Joiner::Function { module, name } => ("function", module, name),
        };
        Ok(make_joiner.bind(py).call1((kind, module, name, names))?.unbind())
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
        Python::attach(|py| {
            let conv =
                Converter::new(py, self.output).map_err(|e| self.errors.failure().record(e))?;
            let exc = to_py_err(err).into_value(py).into_bound(py).into_any();
            let sources = conv
                .source_info(source)
                .and_then(|s| PyTuple::new(py, [s]))
                .map_err(|e| self.errors.failure().record(e))?;
            self.errors.report(py, exc, sources)
        })
    }

    /// How the exceptions of these hooks are classified (see [`Errors::classify`]).
    pub(crate) fn errors(&self) -> &Errors {
        &self.errors
    }

    /// Keeps the first failure for the loader to re-raise, returning a Rust error that ends the
    /// worker's pipeline.
    pub(crate) fn fail(&self, err: PyErr) -> energon_cook::Error {
        self.errors.failure().record(err)
    }

    /// The exception a hook raised, if any (taken once).
    pub(crate) fn take_failure(&self) -> Option<PyErr> {
        self.errors.failure().take()
    }

    /// Keeps `err` as the exception the loader re-raises (a worker process's), unless one is
    /// kept already.
    pub(crate) fn keep_failure(&self, err: PyErr) {
        self.errors.failure().record(err);
    }

    /// The Python `batch` over a batch of items (the task encoder's default batching when it is
    /// not overridden, a list without one), in the batch stage's context.
    pub(crate) fn batch(&self, batch: Batch<Item>, ctx: &SampleContext) -> HookResult<Py<PyAny>> {
        self.with_gil(|conv| {
            let list = PyList::empty(conv.py());
            for keyed in batch.samples {
                list.append(item_to_py(&conv, keyed.value)?)?;
            }
            match self.hook(|s| &s.batch).or(self.hook(|s| &s.default_batch)) {
                Some(hook) => Ok(self.invoke(hook, list.into_any(), ctx)?.unbind()),
                None => Ok(list.into_any().unbind()),
            }
        })
    }

    /// The Python `batch` over `items` as a list (each made a Python object by `to_py`, with the
    /// GIL held), in the batch stage's context: the list itself when `batch` is not overridden,
    /// a generator's batches as many.
    pub(crate) fn batch_objects<T>(
        &self,
        items: Vec<T>,
        to_py: for<'py> fn(&Converter<'py>, T) -> PyResult<Bound<'py, PyAny>>,
        ctx: &SampleContext,
    ) -> HookResult<Outputs<Py<PyAny>>> {
        self.with_gil(|conv| {
            let list = PyList::empty(conv.py());
            for item in items {
                list.append(to_py(&conv, item)?)?;
            }
            match self.hook(|s| &s.batch) {
                Some(hook) => Ok(self.py_outputs(self.invoke(hook, list.into_any(), ctx)?)?),
                None => Ok(Outputs::One(list.into_any().unbind())),
            }
        })
    }

    /// The Python `encode_batch` on a batch Python made (the identity when not overridden).
    pub(crate) fn encode_batch(
        &self,
        batch: Py<PyAny>,
        ctx: &SampleContext,
    ) -> HookResult<Py<PyAny>> {
        let Some(hook) = self.hook(|s| &s.encode_batch) else { return Ok(batch) };
        self.with_gil(|conv| Ok(self.invoke(hook, batch.into_bound(conv.py()), ctx)?.unbind()))
    }
}

/// An item as a Python object (a Rust sample becomes its dataclass).
pub(crate) fn item_to_py<'py>(conv: &Converter<'py>, item: Item) -> PyResult<Bound<'py, PyAny>> {
    match item {
        Item::Rust(sample) => sample_to_py(conv, sample, None),
        Item::Py(obj) => Ok(obj.into_bound(conv.py())),
    }
}

/// An item as a Python object, keeping the item (a Rust sample is copied into its dataclass).
fn item_ref_to_py<'py>(conv: &Converter<'py>, item: &Item) -> PyResult<Bound<'py, PyAny>> {
    match item {
        Item::Rust(sample) => sample_to_py(conv, sample.clone(), None),
        Item::Py(obj) => Ok(obj.bind(conv.py()).clone()),
    }
}
