//! `energon prepare PATH`: index a WebDataset folder or a JSONL file.

use std::{
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, bail};
use clap::Args;
use energon_index::{
    DATASET_YAML, NV_META, dataset_config,
    discover::{self, DatasetKind},
    media::TableMode,
    prepare::{self, PrepareOptions, Progress, SplitChoice},
};
use energon_reader::media::prepare::PrepareMediaOptions;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::{prepare_media, prompt};

/// Flags of `energon prepare`, with the reference's names and defaults.
#[derive(Debug, Args)]
pub(crate) struct PrepareArgs {
    /// Dataset folder (tar shards), JSONL file, or metadataset YAML.
    path: PathBuf,
    /// Show a progress bar.
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,
    /// Do not show a progress bar.
    #[arg(long = "no-progress")]
    no_progress: bool,
    /// Split part and the regex its shard paths match (anchored at the start), e.g.
    /// `train:shards/train_.*`; repeatable; overrides --split-ratio.
    #[arg(long = "split-parts", value_name = "NAME:REGEX")]
    split_parts: Vec<String>,
    /// Drop shards whose relative path matches this regex anywhere.
    #[arg(long, value_name = "REGEX")]
    exclude: Option<String>,
    /// Number of shards indexed in parallel.
    #[arg(long = "num-workers", default_value_t = 16)]
    num_workers: usize,
    /// Only rebuild the .tar.idx files, index.sqlite and index.uuid of an already prepared dataset.
    #[arg(long = "tar-index-only")]
    tar_index_only: bool,
    /// Shuffle shards (with a fixed seed) before splitting by ratio.
    #[arg(long = "shuffle-tars")]
    shuffle_tars: bool,
    /// When sample keys repeat across shards, move every member of every shard into a folder
    /// named after its shard (`parts/data-0.tar/000042.jpg`), renaming the members in place, and
    /// index again.
    #[arg(long)]
    fix_duplicates: bool,
    /// Local folder for the index files of a dataset in an object store (s3://, ...) before they
    /// are uploaded [default: the system's temporary folder].
    #[arg(long = "tmp-path", value_name = "DIR")]
    tmp_path: Option<std::path::PathBuf>,
    /// Write only what loading needs (.tar.idx, .info.json, split.yaml) and an index.sqlite
    /// without the per-sample tables: lookups by key, mount, aux file stores, joins and media
    /// metadata need them; `--sample-tables-only` adds them later. Duplicate keys are not checked.
    #[arg(long = "no-sample-tables")]
    no_sample_tables: bool,
    /// Only build the per-sample tables of index.sqlite (and a new index.uuid) of an already
    /// prepared dataset, from its shards, checked against their .tar.idx; nothing else changes.
    #[arg(long = "sample-tables-only")]
    sample_tables_only: bool,
    /// Never ask: fail when a needed choice is not given by flags.
    #[arg(long = "non-interactive")]
    non_interactive: bool,
    /// Train/val/test split ratio, e.g. "0.8,0.1,0.1" or "8,1,1".
    #[arg(long = "split-ratio", value_name = "RATIO")]
    split_ratio: Option<String>,
    /// Re-prepare an already prepared dataset without asking.
    #[arg(long = "force-overwrite")]
    force_overwrite: bool,
    /// Do not create a dataset.yaml.
    #[arg(long = "skip-dataset-yaml")]
    skip_dataset_yaml: bool,
    /// File name of the dataset config to write inside .nv-meta.
    #[arg(long = "dataset-yaml-name", default_value = DATASET_YAML)]
    dataset_yaml_name: String,
    /// Sample type class for dataset.yaml (e.g. CaptioningSample; CrudeWebdataset for crude data).
    #[arg(long = "sample-type", value_name = "CLASSNAME")]
    sample_type: Option<String>,
    /// Field map for dataset.yaml as JSON, e.g. '{"image": "jpg", "caption": "txt"}'.
    #[arg(long = "field-map", value_name = "JSON")]
    field_map: Option<String>,
    #[command(flatten)]
    media: prepare_media::MediaFlags,
}

pub(crate) fn run(args: PrepareArgs) -> anyhow::Result<u8> {
    let path = args.path.clone();
    let kind = discover::classify(&path)?;
    let media_filter = if args.media.any() {
        if args.tar_index_only {
            bail!("--media-metadata-by-... cannot be combined with --tar-index-only");
        }

        if matches!(kind, DatasetKind::Jsonl | DatasetKind::Metadataset) {
            bail!(
                "{} is not a WebDataset folder; media metadata is computed for WebDatasets \
                 (or, with `energon prepare-media`, for plain folders)",
                path.display()
            );
        }
        Some(args.media.filter()?)
    } else {
        None
    };
    match kind {
        DatasetKind::Jsonl => {
            let n = prepare::prepare_jsonl(&path)
                .with_context(|| format!("while preparing {}", path.display()))?;
            outln!("Found {n} samples in the JSONL dataset {}", path.display());
            outln!("Done");
            return Ok(0);
        }
        DatasetKind::Metadataset => {
            let report = energon_mix::prepare_metadataset(&path)
                .with_context(|| format!("while preparing {}", path.display()))?;
            for line in report.lines() {
                outln!("{line}");
            }
            return Ok(0);
        }
        DatasetKind::Filesystem => {
            bail!(
                "{} holds only media metadata (a filesystem dataset); use `energon prepare-media`",
                path.display()
            );
        }
        DatasetKind::WebDataset | DatasetKind::Folder => {}
    }
    let interactive = !args.non_interactive && prompt::interactive();
    let from_info = args.tar_index_only || args.sample_tables_only;
    if !from_info && prepare::is_prepared(&path) && !args.force_overwrite {
        if args.non_interactive {
            bail!(
                "{} is already prepared; pass --force-overwrite to prepare it again",
                path.display()
            );
        }
        if !interactive {
            bail!(
                "{} is already prepared and there is no terminal to ask; pass --force-overwrite",
                path.display()
            );
        }
        if !prompt::confirm(
            "It seems the dataset had already been prepared. Do you want to continue?",
            false,
        )? {
            return Ok(1);
        }
    }
    let split = split_choice(&args, interactive)?;
    // A dataset.yaml the flags describe in full is checked now and committed with the index; one
    // that depends on the shards' parts or on answers is written after.
    let committed_yaml = if from_info { None } else { flags_dataset_yaml(&args)? };
    let mut options = PrepareOptions::default()
        .split(split)
        .exclude(args.exclude.clone())
        .num_workers(args.num_workers)
        .tar_index_only(args.tar_index_only)
        .shuffle_tars(args.shuffle_tars)
        .fix_duplicates(args.fix_duplicates)
        .tmp_path(args.tmp_path.clone())
        .sample_tables(!args.no_sample_tables)
        .sample_tables_only(args.sample_tables_only);
    if let Some(yaml) = &committed_yaml {
        options = options.config_file(args.dataset_yaml_name.clone(), yaml.clone());
    }
    let show_progress = !args.no_progress;
    let bar = Mutex::new(None::<ProgressBar>);
    let samples_done = AtomicU64::new(0);
    let on_progress = |event: Progress| {
        if let Progress::FixingDuplicates { key } = &event {
            // Said whatever the progress setting: the shards are about to change.
            eprintln!(
                "The dataset contains duplicate keys (e.g. {key:?}); moving every shard's members \
                 into a folder named after the shard."
            );
        }
        if !show_progress {
            return;
        }
        let Ok(mut bar) = bar.lock() else { return };
        match event {
            Progress::Start { n_shards, .. } => {
                let pb = ProgressBar::with_draw_target(
                    Some(n_shards as u64),
                    ProgressDrawTarget::stderr(),
                );
                pb.set_style(
                    ProgressStyle::with_template(
                        "{bar:40} {pos}/{len} shards, {msg} [{elapsed_precise}, eta {eta}]",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                *bar = Some(pb);
            }
            Progress::FixingDuplicates { .. } => {
                if let Some(pb) = bar.take() {
                    pb.finish_and_clear();
                }
                samples_done.store(0, Ordering::Relaxed);
            }
            Progress::Shard { n_samples, .. } => {
                let total = samples_done.fetch_add(n_samples, Ordering::Relaxed) + n_samples;
                if let Some(pb) = bar.as_ref() {
                    pb.inc(1);
                    let rate = total as f64 / pb.elapsed().as_secs_f64().max(1e-3);
                    pb.set_message(format!("{total} samples, {rate:.0} samples/s"));
                }
            }
        }
    };
    let summary = prepare::prepare_dataset(&path, &options, &on_progress)
        .with_context(|| format!("while preparing {}", path.display()))?;
    if let Ok(Some(pb)) = bar.lock().map(|mut b| b.take()) {
        pb.finish_and_clear();
    }
    if let Some(fixed) = &summary.fixed_duplicates {
        let (key, first, second) = &fixed.example;
        outln!(
            "Fixed duplicate keys (e.g. {key:?} in {first} and {second}): renamed {} members",
            fixed.members_renamed
        );
    }
    // The index is committed: a closed stdout must not keep the media pass or dataset.yaml
    // from being written; its error is returned at the end.
    let mut report_err = report_summary(&summary, &path).err();
    for (shard, trailer) in &summary.trailers {
        if let Some(problem) = trailer.problem() {
            eprintln!("warning: {shard}: {problem}");
        }
    }
    if let Some(filter) = media_filter {
        // As the reference, a prepare with media flags replaces the media tables.
        let mut options = PrepareMediaOptions::new(filter, TableMode::Replace);
        options.num_workers = args.num_workers;
        options.tmp_path.clone_from(&args.tmp_path);
        let media = prepare_media::media_pass(&path, options, show_progress)?;
        if let Err(err) = prepare_media::report(&media) {
            report_err.get_or_insert(err);
        }
    }
    if committed_yaml.is_some() {
        if let Err(err) = report_written(&path.join(NV_META).join(&args.dataset_yaml_name)) {
            report_err.get_or_insert(err);
        }
    } else if !from_info {
        write_dataset_yaml(&args, &path, &summary.part_names, interactive)?;
    }
    if let Some(err) = report_err {
        return Err(err);
    }
    // The last line of a successful prepare, as the reference prints it.
    outln!("Done");
    Ok(0)
}

/// What the prepare indexed.
fn report_summary(summary: &prepare::PrepareSummary, path: &Path) -> anyhow::Result<()> {
    outln!(
        "Indexed {} samples in {} shards of {}",
        summary.n_samples(),
        summary.shards.len(),
        path.display()
    );
    for (name, shards) in &summary.split_parts {
        outln!("  split part {name}: {} shards", shards.len());
    }
    if !summary.first_keys.is_empty() {
        outln!("Sample keys of the first shard: {}", summary.first_keys.join(", "));
    }
    outln!("Found the sample parts: {}", summary.part_names.join(", "));
    Ok(())
}

fn split_choice(args: &PrepareArgs, interactive: bool) -> anyhow::Result<SplitChoice> {
    if !args.split_parts.is_empty() {
        let mut parts = Vec::new();
        for spec in &args.split_parts {
            let Some((name, pattern)) = spec.split_once(':') else {
                bail!("--split-parts takes NAME:REGEX, got {spec:?}");
            };
            parts.push((name.trim().to_owned(), pattern.trim().to_owned()));
        }
        return Ok(SplitChoice::Parts(parts));
    }
    if let Some(ratio) = &args.split_ratio {
        return Ok(SplitChoice::Ratio(discover::parse_split_ratio(ratio)?));
    }
    if args.tar_index_only || args.sample_tables_only {
        return Ok(SplitChoice::Ratio([1.0, 0.0, 0.0]));
    }
    if !interactive {
        bail!("no split given: pass --split-ratio (e.g. 8,1,1) or --split-parts NAME:REGEX");
    }
    loop {
        let Some(answer) = prompt::ask(
            "Please enter a desired train/val/test split like \"0.5, 0.2, 0.3\" or \"8,1,1\": ",
        )?
        else {
            bail!("no split given");
        };
        match discover::parse_split_ratio(&answer) {
            Ok(ratio) => return Ok(SplitChoice::Ratio(ratio)),
            Err(err) => eprintln!("{err}"),
        }
    }
}

/// The `dataset.yaml` the flags describe in full (`--sample-type CrudeWebdataset`, or a sample
/// type with `--field-map`), checked; `None` when it is skipped or depends on the shards' parts
/// or on answers to prompts.
fn flags_dataset_yaml(args: &PrepareArgs) -> anyhow::Result<Option<Vec<u8>>> {
    if args.skip_dataset_yaml {
        return Ok(None);
    }
    let config = match (&args.sample_type, &args.field_map) {
        (Some(crude), _) if crude == "CrudeWebdataset" => dataset_config::DatasetConfig::crude(),
        (Some(sample_type), Some(json)) => {
            let sample = known_sample_type(sample_type)?;
            standard_config(sample, &parse_field_map(json)?)?
        }
        _ => return Ok(None),
    };
    Ok(Some(dataset_config::dataset_config_bytes(&config).into_bytes()))
}

fn report_written(yaml_path: &Path) -> anyhow::Result<()> {
    outln!("Wrote {}", yaml_path.display());
    Ok(())
}

/// The built-in sample type `name`, or an error listing them.
fn known_sample_type(name: &str) -> anyhow::Result<&'static dataset_config::SampleTypeInfo> {
    dataset_config::sample_type_info(name).with_context(|| {
        format!(
            "unknown sample type {name:?}; expected one of {} or CrudeWebdataset",
            dataset_config::SAMPLE_TYPES.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
        )
    })
}

/// The standard config of `sample` with `field_map`, whose fields must be the type's.
fn standard_config(
    sample: &dataset_config::SampleTypeInfo,
    field_map: &[(String, String)],
) -> anyhow::Result<dataset_config::DatasetConfig> {
    for (field, _) in field_map {
        let is_base = dataset_config::BASE_FIELDS.iter().any(|f| f.name == field);
        if !is_base && !sample.fields.iter().any(|f| f.name == field) {
            bail!(
                "{} has no field {field:?}; its fields are {}",
                sample.name,
                sample.fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
            );
        }
    }
    let pairs = field_map.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    Ok(dataset_config::DatasetConfig::standard(
        sample.name,
        dataset_config::SampleLoading::FieldMap(dataset_config::FieldMap::from_pairs(pairs)),
    ))
}

fn write_dataset_yaml(
    args: &PrepareArgs,
    root: &Path,
    part_names: &[String],
    interactive: bool,
) -> anyhow::Result<()> {
    if args.skip_dataset_yaml {
        return Ok(());
    }
    let sample_type = match &args.sample_type {
        Some(name) => name.clone(),
        None if !interactive => return Ok(()),
        None => {
            if !prompt::confirm("Do you want to create a dataset.yaml interactively?", true)? {
                return Ok(());
            }
            choose_sample_type()?
        }
    };
    let yaml_path = root.join(NV_META).join(&args.dataset_yaml_name);
    if sample_type == "CrudeWebdataset" {
        dataset_config::write_crude_dataset_yaml(&yaml_path)?;
        outln!("Wrote {}", yaml_path.display());
        return Ok(());
    }
    let sample = known_sample_type(&sample_type)?;
    let field_map: Vec<(String, String)> = match &args.field_map {
        Some(json) => parse_field_map(json)?,
        None if interactive
            && prompt::confirm(
                "Do you want to set a simple field_map[Y] (or write your own sample_loader [n])?",
                true,
            )? =>
        {
            ask_field_map(sample, part_names)?
        }
        None => {
            // As the reference: a sample loader to edit, for the sample type's fields.
            let loader = root.join(NV_META).join(dataset_config::SAMPLE_LOADER_FILE);
            let write = !loader.exists()
                || (interactive
                    && prompt::confirm(
                        "Do you want to override the existing sample loader?",
                        false,
                    )?);
            if write {
                dataset_config::write_sample_loader_template(&loader, sample, part_names)?;
                outln!("Created {}: edit it to return the proper values.", loader.display());
            }
            dataset_config::write_sample_loader_dataset_yaml(&yaml_path, sample.name)?;
            outln!("Wrote {}", yaml_path.display());
            return Ok(());
        }
    };
    dataset_config::write_dataset_config(&yaml_path, &standard_config(sample, &field_map)?)?;
    report_written(&yaml_path)
}

fn parse_field_map(json: &str) -> anyhow::Result<Vec<(String, String)>> {
    let value: serde_json::Value =
        serde_json::from_str(json).with_context(|| format!("--field-map is not JSON: {json}"))?;
    let Some(map) = value.as_object() else { bail!("--field-map must be a JSON object") };
    map.iter()
        .map(|(k, v)| match v.as_str() {
            Some(s) => Ok((k.clone(), s.to_owned())),
            None => bail!("--field-map value for {k:?} must be a string"),
        })
        .collect()
}

fn choose_sample_type() -> anyhow::Result<String> {
    let types = dataset_config::SAMPLE_TYPES;
    for (i, t) in types.iter().enumerate() {
        eprintln!("[{i}] {}", t.name);
    }
    eprintln!("[{}] Crude sample (plain dict for cooking)", types.len());
    loop {
        let Some(answer) = prompt::ask("Please enter a number to choose a class: ")? else {
            bail!("no sample type chosen");
        };
        match answer.parse::<usize>() {
            Ok(i) if i < types.len() => return Ok(types[i].name.to_owned()),
            Ok(i) if i == types.len() => return Ok("CrudeWebdataset".to_owned()),
            _ => eprintln!("Please enter a number between 0 and {}", types.len()),
        }
    }
}

fn ask_field_map(
    sample: &dataset_config::SampleTypeInfo,
    part_names: &[String],
) -> anyhow::Result<Vec<(String, String)>> {
    let mut res = Vec::new();
    eprintln!("The found sample parts are: {}", part_names.join(", "));
    for field in sample.fields {
        loop {
            let hint = match field.default {
                Some(default) if field.optional => format!(", default: {default}"),
                _ => String::new(),
            };
            let question = format!(
                "Please enter a webdataset field name for '{}' ({}{hint}): ",
                field.name, field.type_name
            );
            let Some(answer) = prompt::ask(&question)? else { bail!("field map not completed") };
            if answer.is_empty() {
                if field.optional {
                    break;
                }
                eprintln!("{} has no default; please enter a part name", field.name);
                continue;
            }
            let spec = match dataset_config::FieldSpec::parse(&answer) {
                Ok(spec) => spec,
                Err(err) => {
                    eprintln!("{err}");
                    continue;
                }
            };
            let unknown: Vec<_> =
                spec.part_names().filter(|p| !part_names.iter().any(|q| q == p)).collect();
            if !unknown.is_empty() && part_names.len() < 50 {
                eprintln!("unknown part(s) {unknown:?}; found parts: {}", part_names.join(", "));
                continue;
            }
            res.push((field.name.to_owned(), answer));
            break;
        }
    }
    Ok(res)
}
