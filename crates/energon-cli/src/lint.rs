//! `energon lint PATH`: checks the index files, then reads and decodes every sample of every
//! split part in parallel, and reports each bad sample with its shard, key and reason.
//!
//! Before reading, every shard is checked against its index files (its size against the `.tar.idx`
//! end offset, every `index.sqlite` row against the `.tar.idx` and the tar headers).
//!
//! Exit status: 0 when everything reads, 1 when a problem was found (each is listed on stderr),
//! 2 when the dataset cannot be opened at all.

use std::path::PathBuf;

use clap::Args;
use energon_index::discover::{DatasetKind, classify};
use energon_reader::lint::{check_index_files, check_shard_rows, lint_samples};
use indicatif::{ProgressBar, ProgressStyle};

use crate::splits;

/// Flags of `energon lint`.
#[derive(Debug, Args)]
pub(crate) struct LintArgs {
    /// Prepared dataset folder (or JSONL file).
    path: PathBuf,
    /// The split parts to check, comma-separated.
    #[arg(long = "split-parts", default_value = "train,val,test")]
    split_parts: String,
    /// Dataset config file name inside .nv-meta.
    #[arg(long = "dataset-config", default_value = energon_index::DATASET_YAML)]
    dataset_config: String,
    /// Split config file name inside .nv-meta.
    #[arg(long = "split-config", default_value = energon_index::SPLIT_YAML)]
    split_config: String,
    /// Number of threads reading samples (0: one per core).
    #[arg(long, default_value_t = 0)]
    parallel: usize,
}

pub(crate) fn run(args: LintArgs) -> anyhow::Result<u8> {
    let kind = classify(&args.path)?;
    // Shards that do not match their index files; their samples are still read below, so that
    // every other problem is listed too.
    let mut n_changed = 0;
    if kind == DatasetKind::WebDataset {
        outln!("Checking the index files...");
        let problems = check_index_files(&args.path)?;
        for p in &problems {
            match &p.index_count {
                Ok(n) => eprintln!(
                    "Error in shard {}: Shard length in Info file {} != {n} (length in index)",
                    p.shard, p.info_count
                ),
                Err(reason) => eprintln!("Error in shard {}: {reason}", p.shard),
            }
        }
        if !problems.is_empty() {
            eprintln!(
                "error: validation failed: {} index file(s) do not match .info.json",
                problems.len()
            );
            return Ok(1);
        }
        outln!("Checking the shards against their index files...");
        let changed = check_shard_rows(&args.path)?;
        for p in &changed {
            eprintln!("Error in shard {}: {}", p.shard, p.error);
        }
        n_changed = changed.len();
    } else {
        outln!(
            "{} is not a directory, therefore the index will not be checked",
            args.path.display()
        );
    }

    let mut failed: Vec<String> = Vec::new();
    let mut n_checked = 0u64;
    let split_parts = splits::split_parts(kind == DatasetKind::Jsonl, &args.split_parts);
    for split_part in split_parts {
        let Some(reader) =
            splits::open_split(&args.path, split_part, &args.split_config, &args.dataset_config)?
        else {
            outln!("Skipping empty split part {split_part}");
            continue;
        };
        if let Some(loader) = reader.custom_loader() {
            eprintln!(
                "warning: {loader} is Python code energon-rs cannot run; checking the parts as crude samples"
            );
        }
        let label = if kind == DatasetKind::Jsonl {
            "records".to_owned()
        } else {
            format!("split part {split_part}")
        };
        outln!("Checking {label} ({} samples)...", reader.len());
        let bar = ProgressBar::new(reader.len());
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples ({per_sec}, {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let report = lint_samples(&reader, args.parallel, &|done| bar.set_position(done))?;
        bar.finish_and_clear();
        n_checked += report.n_samples - report.n_excluded;
        for problem in &report.problems {
            let (shard, key) = match problem.error.sample_at() {
                Some(at) => (at.shard.clone(), at.key.clone().unwrap_or_else(|| "?".to_owned())),
                None => (problem.error.shard().unwrap_or("?").to_owned(), "*".to_owned()),
            };
            eprintln!(
                "bad sample {} of {split_part}: shard {shard}, key {key}: {}",
                problem.index, problem.error
            );
            failed.push(format!("{shard}/{key}"));
        }
        outln!(
            "{}: {} samples read, {} excluded, {} failed",
            split_part,
            report.n_samples - report.n_excluded - report.problems.len() as u64,
            report.n_excluded,
            report.problems.len()
        );
    }
    if n_changed > 0 {
        eprintln!(
            "error: validation failed: {n_changed} shard(s) do not match their index files \
             (run `energon prepare` again)"
        );
    }
    if failed.is_empty() {
        if n_changed > 0 {
            return Ok(1);
        }
        outln!("OK: {n_checked} samples read and decoded without error");
        return Ok(0);
    }
    eprintln!(
        "The following shards/samples failed (to skip them, add them to the exclude list of the split config):"
    );
    for item in &failed {
        eprintln!("- {item}");
    }
    eprintln!("error: validation failed: {} bad sample(s)", failed.len());
    Ok(1)
}
