//! `energon info PATH`: a summary of a prepared dataset, in the reference's Markdown form.
//!
//! ```text
//!
//! * my-dataset: `/data/my-dataset` (2,000 samples, 1.23 MiB in 8 shards)
//!   * Created with energon version: 7.4.1
//!   * Sample Type: {py:class}`CaptioningSample <megatron.energon.CaptioningSample>`
//!   * Default Splits:
//!     * `train`: 75%, 1,500 samples in 6 shards
//!     * `val`: 25%, 500 samples in 2 shards
//!
//! ```
//!
//! Split parts are listed train, val, test first, then the others in file order; percentages
//! are of all samples in `.info.json`, and sample excludes are not subtracted (as in the
//! reference). Unlike the reference, crude and legacy `dataset.yaml` forms and JSONL files are
//! described too.

use std::{
    fmt::Write as _,
    path::{Component, Path, PathBuf},
};

use anyhow::{Context, bail};
use clap::Args;
use energon_index::{
    NV_META,
    dataset_config::{DatasetConfig, ENERGON_MODULE, read_dataset_config},
    discover::{DatasetKind, classify},
    info::read_dataset_info,
    split::{brace_expand, read_dataset_split},
    storage,
};

/// Flags of `energon info`.
#[derive(Debug, Args)]
pub(crate) struct InfoArgs {
    /// Prepared dataset folder (or JSONL file).
    path: PathBuf,
    /// Split config file name inside .nv-meta.
    #[arg(long = "split-config", default_value = energon_index::SPLIT_YAML)]
    split_config: String,
    /// Dataset config file name inside .nv-meta.
    #[arg(long = "dataset-config", default_value = energon_index::DATASET_YAML)]
    dataset_config: String,
}

pub(crate) fn run(args: InfoArgs) -> anyhow::Result<u8> {
    out!("{}", summary(&args)?);
    Ok(0)
}

/// The text `energon info` prints.
fn summary(args: &InfoArgs) -> anyhow::Result<String> {
    let path = absolute(&args.path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match classify(&path)? {
        DatasetKind::WebDataset => {}
        DatasetKind::Jsonl => return jsonl_summary(&path, &name),
        DatasetKind::Metadataset => {
            bail!("{} is a metadataset; `energon info` describes a single dataset", path.display())
        }
        DatasetKind::Filesystem | DatasetKind::Folder => bail!(
            "{} is not a prepared dataset (no {NV_META}/.info.json); run `energon prepare` first",
            path.display()
        ),
    }
    let info = read_dataset_info(&path)?;
    let (split_path, split) = read_dataset_split(&path, Some(&args.split_config))?;
    let config_path = path.join(NV_META).join(&args.dataset_config);
    let sample_type = if storage::is_file(&config_path) {
        sample_class(&read_dataset_config(&config_path)?)
    } else {
        format!("none (no {NV_META}/{})", args.dataset_config)
    };
    let n_samples = info.n_samples();
    let mut n_bytes = 0u64;
    for shard in info.shard_names() {
        let shard_path = path.join(shard);
        n_bytes += storage::size(&shard_path)
            .with_context(|| format!("cannot stat shard {}", shard_path.display()))?;
    }
    let mut parts: Vec<(&str, Vec<String>)> = Vec::new();
    for (part, patterns) in &split.split_parts {
        let mut shards = Vec::new();
        for pattern in patterns {
            shards.extend(brace_expand(pattern)?);
        }
        parts.push((part, shards));
    }
    // COMPAT(energon 7.4): tools/info.py lists train, val, test, then the rest in file order.
    parts.sort_by_key(|(part, _)| {
        ["train", "val", "test"].iter().position(|p| p == part).unwrap_or(3)
    });
    let mut splits = String::new();
    for (part, shards) in &parts {
        let mut count = 0u64;
        for shard in shards {
            count += info.count_of(shard).with_context(|| {
                format!(
                    "{}: split part {part:?} names shard {shard:?}, which is not in .info.json",
                    split_path.display()
                )
            })?;
        }
        // Rounded to 2 decimals, then printed with none, as the reference does.
        let ratio = if n_samples == 0 { 0.0 } else { 100.0 * count as f64 / n_samples as f64 };
        let ratio = (ratio * 100.0).round() / 100.0;
        writeln!(
            splits,
            "    * `{part}`: {ratio:.0}%, {} samples in {} shards",
            thousands(count),
            shards.len()
        )?;
    }
    Ok(format!(
        "\n* {name}: `{}` ({} samples, {} in {} shards)\n  * Created with energon version: {}\n  \
         * Sample Type: {sample_type}  \n  * Default Splits:\n{splits}\n\n",
        path.display(),
        thousands(n_samples),
        human_size(n_bytes),
        info.shard_counts.len(),
        info.energon_version.as_deref().unwrap_or("unknown"),
    ))
}

fn jsonl_summary(path: &Path, name: &str) -> anyhow::Result<String> {
    let n_samples = energon_index::jsonl_idx::JsonlIndex::open(path)?.len() as u64;
    let n_bytes = storage::size(path)?;
    Ok(format!(
        "\n* {name}: `{}` ({} samples, {} in 1 file)\n  * Sample Type: \
         {{py:class}}`CrudeSample <megatron.energon.CrudeSample>` (JSONL, key = line number, part \
         `json`)\n\n",
        path.display(),
        thousands(n_samples),
        human_size(n_bytes),
    ))
}

/// The class cross-reference the reference prints for the sample type.
fn sample_class(config: &DatasetConfig) -> String {
    let (module, class) = match config {
        DatasetConfig::Standard(c) => {
            let module = if c.sample_type.builtin_sample_type().is_some() {
                ENERGON_MODULE
            } else {
                c.sample_type.module.as_str()
            };
            (module, c.sample_type.class.as_str())
        }
        DatasetConfig::Legacy(c) => (ENERGON_MODULE, c.sample_type.name),
        DatasetConfig::Crude(_) => (ENERGON_MODULE, energon_index::dataset_config::CRUDE_CLASS),
    };
    format!("{{py:class}}`{class} <{module}.{class}>`")
}

/// `1234567` → `1,234,567` (Python's `{:,}`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut res = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            res.push(',');
        }
        res.push(c);
    }
    res
}

/// Bytes in binary units with two decimals, as the reference's `fmt_size`.
fn human_size(n: u64) -> String {
    let mut size = n as f64;
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"] {
        if size < 1024.0 {
            return format!("{size:.2} {unit}");
        }
        size /= 1024.0;
    }
    format!("{size:.2} PiB")
}

/// The absolute, lexically normalized path (`.` and `..` resolved, symlinks kept), as the
/// reference's `EPath` prints it.
fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    if storage::is_remote(path) {
        return Ok(storage::normalize(path)?);
    }
    let abs =
        std::path::absolute(path).with_context(|| format!("cannot resolve {}", path.display()))?;
    let mut res = PathBuf::new();
    for component in abs.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                res.pop();
            }
            other => res.push(other),
        }
    }
    Ok(res)
}
