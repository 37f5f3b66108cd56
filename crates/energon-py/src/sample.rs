//! Samples and batches as the Python dataclasses of `energon_rs.sample`.
//!
//! A batch is collated off the GIL, on the loader's worker thread that made it
//! ([`Collated::new`], called by the batch stage), the way the
//! reference's default batching does it: a tensor field is stacked with zero padding into one
//! array, every other field becomes a list, and the batch is a sample of the same type whose
//! fields hold these.

use energon_cook::{Batch, RestoreKey};
use energon_reader::{Decoded, Sample, SampleMeta, Tensor, sample::Field};
use pyo3::{
    prelude::*,
    types::{PyDict, PyList},
};

use crate::convert::{Converter, Output, is_pil_image_field, origin_of};

/// A sample as a dataclass (a `CrudeSample` dict for crude samples); `key` is the loader's
/// restore key of the item, when there is one.
pub(crate) fn sample_to_py<'py>(
    conv: &Converter<'py>,
    sample: Sample,
    key: Option<&RestoreKey>,
) -> PyResult<Bound<'py, PyAny>> {
    let py_kwargs = PyDict::new(conv.py());
    if let Sample::Fields(sample) = sample {
        // The class as the reference makes it: `sample_type(**base fields, **fields)`.
        conv.set_origin(origin_of(&sample.meta));
        conv.meta_into(sample.meta, key, &py_kwargs)?;
        for (name, value) in sample.fields {
            py_kwargs.set_item(name, conv.decoded(value)?)?;
        }
        return conv.named_class(&sample.class)?.call((), Some(&py_kwargs));
    }
    let type_name = sample.type_name().to_owned();
    if let Sample::Crude(crude) = sample {
        conv.set_origin(origin_of(&crude.meta));
        conv.meta_into(crude.meta, key, &py_kwargs)?;
        py_kwargs.set_item("__shard__", crude.shard.as_ref())?;
        for (name, value) in crude.parts {
            py_kwargs.set_item(name, conv.decoded(value)?)?;
        }
        return conv.class("CrudeSample")?.call1((py_kwargs,));
    }
    let (meta, fields) = sample.into_fields();
    conv.set_origin(origin_of(&meta));
    conv.meta_into(meta, key, &py_kwargs)?;
    for (name, value) in fields {
        let value = conv.named_field(&name, value)?;
        py_kwargs.set_item(name, value)?;
    }
    conv.class(&type_name)?.call((), Some(&py_kwargs))
}

/// One field of a collated batch.
#[derive(Debug)]
enum Column {
    /// The samples' tensors stacked (zero-padded) into one.
    Stacked(Tensor),
    /// One value per sample.
    Values(Vec<Field>),
}

/// A batch collated without the GIL, ready to become a Python object.
#[derive(Debug)]
pub(crate) struct Collated {
    restore_key: RestoreKey,
    type_name: String,
    crude: bool,
    metas: Vec<SampleMeta>,
    columns: Vec<(String, Column)>,
}

impl Collated {
    /// Collates a batch of samples of one type: tensor fields stacked, others (and images that
    /// become PIL images) listed. The batch's restore key is set by [`with_key`](Self::with_key).
    pub(crate) fn new(batch: Batch<Sample>, output: Output) -> Result<Self, String> {
        let Batch { samples } = batch;
        let restore_key = RestoreKey::default();
        let Some(first) = samples.first() else {
            return Err("empty batch".to_owned());
        };
        if matches!(first.value, Sample::Fields(_)) {
            return Err("samples of classes built in Python are batched in Python".to_owned());
        }
        let type_name = first.value.type_name().to_owned();
        let crude = matches!(first.value, Sample::Crude(_));
        let mut metas = Vec::with_capacity(samples.len());
        let mut columns: Vec<(String, Vec<Field>)> = Vec::new();
        for (i, keyed) in samples.into_iter().enumerate() {
            let sample = keyed.value;
            if sample.type_name() != type_name {
                return Err(format!(
                    "cannot batch a {} with a {} (sample {:?})",
                    type_name,
                    sample.type_name(),
                    sample.key()
                ));
            }
            let (meta, fields) = sample.into_fields();
            if i == 0 {
                columns = fields.into_iter().map(|(n, v)| (n, vec![v])).collect();
            } else {
                if fields.len() != columns.len()
                    || fields.iter().zip(&columns).any(|((a, _), (b, _))| a != b)
                {
                    return Err(format!(
                        "sample {:?} has other fields than the first of its batch",
                        meta.key
                    ));
                }
                for ((_, value), (_, column)) in fields.into_iter().zip(&mut columns) {
                    column.push(value);
                }
            }
            metas.push(meta);
        }
        let columns = columns
            .into_iter()
            .map(|(name, values)| {
                if is_pil_image_field(output, &name) {
                    return Ok((name, Column::Values(values)));
                }
                Ok((name, stack_if_tensors(values)?))
            })
            .collect::<Result<_, String>>()?;
        Ok(Collated { restore_key, type_name, crude, metas, columns })
    }

    /// The batch with the loader's restore key.
    pub(crate) fn with_key(self, restore_key: RestoreKey) -> Self {
        Collated { restore_key, ..self }
    }

    /// The batch as a Python object: a dataclass of the samples' type (a dict for crude samples)
    /// whose `__key__`, `__subflavors__`, `__sources__` and fields are lists or stacked arrays.
    pub(crate) fn into_py<'py>(self, conv: &Converter<'py>) -> PyResult<Bound<'py, PyAny>> {
        let py = conv.py();
        let kwargs = PyDict::new(py);
        let keys = PyList::empty(py);
        let subflavors = PyList::empty(py);
        let sources = PyList::empty(py);
        let origins: Vec<String> = self.metas.iter().map(origin_of).collect();
        for meta in &self.metas {
            keys.append(&meta.key)?;
            subflavors.append(conv.subflavors(meta)?)?;
        }
        for meta in self.metas {
            let per_sample = PyList::empty(py);
            for source in meta.sources {
                per_sample.append(conv.source_info(source)?)?;
            }
            sources.append(per_sample.to_tuple())?;
        }
        kwargs.set_item("__key__", keys)?;
        kwargs.set_item("__restore_key__", conv.restore_key(&self.restore_key)?)?;
        kwargs.set_item("__subflavors__", conv.batch_subflavors(subflavors, self.crude)?)?;
        kwargs.set_item("__sources__", sources)?;
        for (name, column) in self.columns {
            let value = match column {
                Column::Stacked(t) => conv.tensor(t)?,
                Column::Values(values) => {
                    let list = PyList::empty(py);
                    for (v, origin) in values.into_iter().zip(&origins) {
                        conv.set_origin(origin.clone());
                        list.append(conv.named_field(&name, v)?)?;
                    }
                    list.into_any()
                }
            };
            kwargs.set_item(name, value)?;
        }
        if self.crude {
            return conv.class("CrudeSample")?.call1((kwargs,));
        }
        conv.class(&self.type_name)?.call((), Some(&kwargs))
    }
}

/// The tensors of a field stacked, if the first value is a tensor (as the reference decides);
/// the values as they are otherwise.
fn stack_if_tensors(values: Vec<Field>) -> Result<Column, String> {
    let tensors: Option<Vec<&Tensor>> = values.iter().map(as_tensor).collect();
    match tensors {
        Some(tensors) if !tensors.is_empty() => {
            Ok(Column::Stacked(Tensor::stack_padded(&tensors)?))
        }
        _ if values.first().and_then(as_tensor).is_some() => {
            Err("cannot batch a tensor field with values that are not tensors".to_owned())
        }
        _ => Ok(Column::Values(values)),
    }
}

fn as_tensor(field: &Field) -> Option<&Tensor> {
    match field {
        Field::Tensor(t) | Field::Decoded(Decoded::Image(t) | Decoded::Tensor(t)) => Some(t),
        _ => None,
    }
}
