//! A cooker for a crude dataset with an auxiliary source: the JSONL records name a sample key and
//! carry its caption; the cooker reads the image `<key>.jpg` from the metadataset's auxiliary
//! source `images` (the prepared WebDataset) and makes a captioning sample of both.

use std::path::Path;

use energon_cook::{
    Batch, CookContext, Cooker, DefaultTaskEncoder, HookError, HookResult, Keyed, Loader,
    LoaderBuilder, LoaderSpec,
};
use energon_dist::WorkerConfig;

use energon_reader::{Decoded, Sample, sample::CaptioningSample};

/// Cooks a record `{"key": ..., "caption": ...}` into a captioning sample whose image is the
/// auxiliary source's `<key>.jpg`, decoded.
pub fn cook_with_image(sample: Sample, ctx: &CookContext<'_>) -> HookResult<Sample> {
    let Sample::Crude(crude) = sample else {
        return Err(HookError::msg(format!(
            "expected a crude sample, got a {}",
            sample.type_name()
        )));
    };
    let Some(Decoded::Json(record)) = crude.get("json") else {
        return Err(HookError::msg("the record has no json part"));
    };
    let (Some(key), Some(caption)) = (record["key"].as_str(), record["caption"].as_str()) else {
        return Err(HookError::msg(format!("the record has no key or caption: {record}")));
    };
    let images =
        ctx.aux("images").ok_or_else(|| HookError::fatal_msg("no auxiliary source `images`"))?;
    let (image, source) = images.get_decoded(&format!("{key}.jpg"))?;
    let Decoded::Image(image) = image else {
        return Err(HookError::msg(format!("{key}.jpg is not an image")));
    };
    let mut meta = crude.meta.clone();
    meta.sources.push(source);
    Ok(Sample::Captioning(CaptioningSample { meta, image, caption: caption.to_owned() }))
}

/// The training loader of a metadataset with one crude JSONL leaf and an `images` auxiliary
/// source, cooked by [`cook_with_image`]: rank 0 of 1, `num_workers` workers, batches of 4.
pub fn builder(
    metadataset: &Path,
    num_workers: usize,
) -> energon_cook::Result<LoaderBuilder<Sample, DefaultTaskEncoder<Sample>>> {
    let mut spec = LoaderSpec::new(metadataset, WorkerConfig::new(0, 1, num_workers)?);
    spec.batch_size = Some(4);
    let encoder = DefaultTaskEncoder::samples().with_cookers(vec![Cooker::new(cook_with_image)]);
    Ok(spec.samples()?.task_encoder(encoder))
}

/// The loader of [`builder`] for this package's `data/crude-with-aux.yaml`.
pub fn loader(num_workers: usize) -> energon_cook::Result<Loader<Keyed<Batch<Sample>>>> {
    builder(&crate::data("crude-with-aux.yaml"), num_workers)?.build_batches()
}
