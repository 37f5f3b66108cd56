//! The typed contract between a Python task encoder and the Rust pipeline (`_HookSet`), and the
//! classification of a hook's exception for energon-cook's one error policy.
//!
//! Python hands over its hooks as they are: they raise. Rust decides what an exception means,
//! as the reference does: `SkipSample` skips the sample; a "system" exception (or
//! `FatalSampleError`) ends the loader; any other goes to the worker config's error handler, in
//! the worker, and is then a failure that energon-cook's [`energon_cook::ErrorPolicy`] counts
//! (per worker and stage, in the checkpoint) against the hook's failure tolerance.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use energon_cook::{ErrorPolicy, HookError};
use pyo3::{
    prelude::*,
    types::{PyDict, PyTuple, PyType},
};

/// The hooks of a task encoder and the error rules of its worker config, as the Python package
/// hands them to a dataset (`energon_rs.task_encoder._hooks` makes it). Every hook is optional
/// (`None`: not overridden); hooks raise, and a generator hook's outputs come as a `lazy`
/// object (`pull(ctx)` gives `(value,)` or `None` at the end, `value` is the input).
#[pyclass(frozen, name = "_HookSet", module = "energon_rs._native")]
#[derive(Debug)]
pub(crate) struct HookSet {
    pub(crate) encode_sample: Option<Py<PyAny>>,
    pub(crate) preencode_sample: Option<Py<PyAny>>,
    pub(crate) postencode_sample: Option<Py<PyAny>>,
    pub(crate) select_samples_to_pack: Option<Py<PyAny>>,
    pub(crate) pack_selected_samples: Option<Py<PyAny>>,
    pub(crate) batch_group_criterion: Option<Py<PyAny>>,
    pub(crate) batch: Option<Py<PyAny>>,
    pub(crate) default_batch: Option<Py<PyAny>>,
    pub(crate) encode_batch: Option<Py<PyAny>>,
    pub(crate) make_cook: Option<Py<PyAny>>,
    pub(crate) make_joiner: Option<Py<PyAny>>,
    pub(crate) lazy: Option<Py<PyType>>,
    pub(crate) config: Vec<(String, String)>,
    pub(crate) rules: Arc<ErrorRules>,
    pub(crate) policy: ErrorPolicy,
    /// Makes the loader's cache pool the one cookers see.
    #[pyo3(get)]
    set_cache_pool: Option<Py<PyAny>>,
    /// Whether items are handed out as torch tensors.
    #[pyo3(get)]
    pub(crate) torch: bool,
    /// Whether Python runs for every sample or batch (a loader then runs its workers in
    /// processes by default).
    #[pyo3(get)]
    per_sample_python: bool,
    /// Whether the default batching gives `__subflavors__` as one dict of lists (a plain
    /// `TaskEncoder`'s `generic_batch`) instead of one dict per sample (`DefaultTaskEncoder`).
    pub(crate) subflavors_by_key: bool,
}

#[pymethods]
impl HookSet {
    #[new]
    #[pyo3(signature = (
        *, handler, skip_error, fatal_errors, fatal_error, torch, config,
        failure_tolerance, hook_tolerances, per_sample_python, subflavors_by_key = false,
        lazy = None,
        encode_sample = None, preencode_sample = None, postencode_sample = None,
        select_samples_to_pack = None, pack_selected_samples = None, batch_group_criterion = None,
        batch = None, default_batch = None, encode_batch = None, make_cook = None,
        make_joiner = None, set_cache_pool = None
    ))]
    #[expect(clippy::too_many_arguments, reason = "one keyword argument per part of the contract")]
    fn new(
        handler: Py<PyAny>,
        skip_error: Py<PyType>,
        fatal_errors: Py<PyTuple>,
        fatal_error: Py<PyType>,
        torch: bool,
        config: Vec<(String, String)>,
        failure_tolerance: u64,
        hook_tolerances: BTreeMap<String, u64>,
        per_sample_python: bool,
        subflavors_by_key: bool,
        lazy: Option<Py<PyType>>,
        encode_sample: Option<Py<PyAny>>,
        preencode_sample: Option<Py<PyAny>>,
        postencode_sample: Option<Py<PyAny>>,
        select_samples_to_pack: Option<Py<PyAny>>,
        pack_selected_samples: Option<Py<PyAny>>,
        batch_group_criterion: Option<Py<PyAny>>,
        batch: Option<Py<PyAny>>,
        default_batch: Option<Py<PyAny>>,
        encode_batch: Option<Py<PyAny>>,
        make_cook: Option<Py<PyAny>>,
        make_joiner: Option<Py<PyAny>>,
        set_cache_pool: Option<Py<PyAny>>,
    ) -> Self {
        let policy = hook_tolerances
            .into_iter()
            .fold(ErrorPolicy::with_tolerance(failure_tolerance), |p, (hook, t)| {
                p.hook_tolerance(hook, t)
            });
        HookSet {
            encode_sample,
            preencode_sample,
            postencode_sample,
            select_samples_to_pack,
            pack_selected_samples,
            batch_group_criterion,
            batch,
            default_batch,
            encode_batch,
            make_cook,
            make_joiner,
            lazy,
            config,
            rules: Arc::new(ErrorRules { handler, skip_error, fatal_errors, fatal_error }),
            policy,
            set_cache_pool,
            torch,
            per_sample_python,
            subflavors_by_key,
        }
    }

    /// The error policy as `(failure_tolerance, {hook: tolerance})`.
    #[getter]
    fn policy(&self) -> (u64, BTreeMap<String, u64>) {
        (self.policy.failure_tolerance, self.policy.hook_tolerances.iter().cloned().collect())
    }
}

/// What an exception of a hook means (the reference's `ErrorContext`), and who hears of a
/// failure.
#[derive(Debug)]
pub(crate) struct ErrorRules {
    /// The worker config's `global_error_handler(exc, sample, sources)`.
    handler: Py<PyAny>,
    /// `SkipSample`.
    skip_error: Py<PyType>,
    /// The exceptions that end the loader at once.
    fatal_errors: Py<PyTuple>,
    /// `FatalSampleError`, which a fatal exception becomes (with it as its cause).
    fatal_error: Py<PyType>,
}

/// The first exception that ends the loader, kept to be raised again where the loader is
/// iterated (shared by a hook set's stages and the generators its hooks made).
#[derive(Debug, Default, Clone)]
pub(crate) struct Failure(Arc<Mutex<Option<PyErr>>>);

impl Failure {
    /// Keeps `err` (unless an earlier one is kept) and says that the loader stops.
    pub(crate) fn record(&self, err: PyErr) -> energon_cook::Error {
        let message = err.to_string();
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(err);
        }
        energon_cook::Error::Raised { message }
    }

    /// The kept exception, if any (taken once).
    pub(crate) fn take(&self) -> Option<PyErr> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// The error rules of a pipeline with where its ending exception is kept.
#[derive(Debug, Default, Clone)]
pub(crate) struct Errors {
    /// `None` for a pipeline without Python hooks.
    rules: Option<Arc<ErrorRules>>,
    failure: Failure,
}

impl Errors {
    pub(crate) fn new(rules: Arc<ErrorRules>) -> Self {
        Errors { rules: Some(rules), failure: Failure::default() }
    }

    /// The kept exception (see [`Failure`]).
    pub(crate) fn failure(&self) -> &Failure {
        &self.failure
    }

    /// What `err`, raised by `hook` on `sample`, means for the sample: a skip, a failure (the
    /// error handler has seen it: the policy counts it and drops the sample) or the end of the
    /// loader (the exception, as the loader will raise it, is kept).
    pub(crate) fn classify(
        &self,
        py: Python<'_>,
        err: PyErr,
        hook: &Bound<'_, PyAny>,
        sample: Option<&Bound<'_, PyAny>>,
    ) -> HookError {
        let Some(rules) = &self.rules else { return self.fatal(err) };
        let exc = err.value(py);
        if exc.is_instance(rules.skip_error.bind(py)).unwrap_or(false) {
            return HookError::Skip;
        }
        if exc.is_instance(rules.fatal_errors.bind(py).as_any()).unwrap_or(false) {
            if exc.is_instance(rules.fatal_error.bind(py)).unwrap_or(false) {
                return self.fatal(err);
            }
            let name = hook
                .getattr("__qualname__")
                .and_then(|n| n.extract::<String>())
                .unwrap_or_else(|_| "a hook".to_owned());
            let repr = exc.repr().map(|r| r.to_string()).unwrap_or_default();
            let fatal = PyErr::from_type(
                rules.fatal_error.bind(py).clone(),
                format!("fatal error in {name}: {repr}"),
            );
            fatal.set_cause(py, Some(err));
            return self.fatal(fatal);
        }
        let none = py.None().into_bound(py);
        let sample = sample.unwrap_or(&none);
        let sources = sources_of(sample);
        match rules.handler.bind(py).call1((exc, sample, sources)) {
            Ok(_) => HookError::Failed(Box::new(err)),
            // The handler re-raised (the reference's `reraise_exception`): the loader stops.
            Err(raised) => self.fatal(raised),
        }
    }

    /// Tells the worker config's error handler of a sample that the Rust core could not build
    /// (`exc`, with the sample's sources); an exception of the handler ends the loader.
    pub(crate) fn report(
        &self,
        py: Python<'_>,
        exc: Bound<'_, PyAny>,
        sources: Bound<'_, PyTuple>,
    ) -> Result<(), energon_cook::Error> {
        let Some(rules) = &self.rules else { return Ok(()) };
        match rules.handler.bind(py).call1((exc, py.None(), sources)) {
            Ok(_) => Ok(()),
            Err(raised) => Err(self.failure.record(raised)),
        }
    }

    /// `err` ends the loader (kept to be raised again).
    pub(crate) fn fatal(&self, err: PyErr) -> HookError {
        HookError::Fatal(Box::new(self.failure.record(err)))
    }
}

/// The `__sources__` of a sample (a dict's item or an attribute), `None` without.
fn sources_of<'py>(sample: &Bound<'py, PyAny>) -> Bound<'py, PyAny> {
    let py = sample.py();
    let found = match sample.cast::<PyDict>() {
        Ok(dict) => dict.get_item("__sources__").ok().flatten(),
        Err(_) => sample.getattr("__sources__").ok(),
    };
    found.unwrap_or_else(|| py.None().into_bound(py))
}
