//! `energon prepare-media PATH`: media metadata of a prepared WebDataset or a plain folder, and
//! the `--media-metadata-by-...` flags shared with `energon prepare`.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use anyhow::{Context, bail};
use clap::Args;
use energon_index::media::TableMode;
use energon_reader::media::{
    MediaFilter,
    prepare::{MediaSourceKind, MediaSummary, PrepareMediaOptions, Progress, prepare_media},
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How many skipped entries are listed after a run (all are counted).
const SKIPPED_SHOWN: usize = 10;

/// The media strategy flags; exactly one is needed where media metadata is computed.
#[derive(Debug, Clone, Args)]
pub(crate) struct MediaFlags {
    /// Media are the entries whose lower-cased name matches one of these glob patterns
    /// (comma-separated, e.g. '*.jpg,*.wav').
    #[arg(long = "media-metadata-by-glob", value_name = "PATTERNS")]
    glob: Option<String>,
    /// Media are recognized by their content's leading bytes (then by extension).
    #[arg(long = "media-metadata-by-header")]
    header: bool,
    /// Media are recognized by their file extension.
    #[arg(long = "media-metadata-by-extension")]
    extension: bool,
}

impl MediaFlags {
    /// Whether any media flag was given.
    pub(crate) fn any(&self) -> bool {
        self.glob.is_some() || self.header || self.extension
    }

    /// The filter of the given flags (exactly one).
    pub(crate) fn filter(&self) -> anyhow::Result<MediaFilter> {
        Ok(MediaFilter::from_flags(self.glob.as_deref(), self.header, self.extension)?)
    }
}

/// Flags of `energon prepare-media`, with the reference's names and defaults.
#[derive(Debug, Args)]
pub(crate) struct PrepareMediaArgs {
    /// A prepared WebDataset folder, or any folder of media files.
    path: PathBuf,
    /// Show a progress bar.
    #[arg(long, overrides_with = "no_progress")]
    progress: bool,
    /// Do not show a progress bar.
    #[arg(long = "no-progress")]
    no_progress: bool,
    /// Number of shards (or files) read in parallel.
    #[arg(long = "num-workers", default_value_t = 16)]
    num_workers: usize,
    #[command(flatten)]
    media: MediaFlags,
    /// Where to build index.sqlite for a remote dataset before its upload (default the system's
    /// temporary folder); a local dataset's database is built next to the old one.
    #[arg(long = "tmp-path", value_name = "DIR")]
    tmp_path: Option<PathBuf>,
}

pub(crate) fn run(args: PrepareMediaArgs) -> anyhow::Result<u8> {
    let filter = args.media.filter()?;
    if !energon_index::storage::is_dir(&args.path) {
        bail!(
            "{} is not a folder; prepare-media takes a prepared WebDataset or a folder of media files",
            args.path.display()
        );
    }
    if args.tmp_path.is_some() && !energon_index::storage::is_remote(&args.path) {
        tracing::info!("--tmp-path is only used for remote datasets; ignored");
    }
    let mut options = PrepareMediaOptions::new(filter, TableMode::Add);
    options.num_workers = args.num_workers;
    options.tmp_path.clone_from(&args.tmp_path);
    let summary = media_pass(&args.path, options, !args.no_progress)?;
    report(&summary)?;
    Ok(0)
}

/// Runs the media pass with a progress bar on standard error and prints what it is doing.
pub(crate) fn media_pass(
    path: &Path,
    options: PrepareMediaOptions,
    show_progress: bool,
) -> anyhow::Result<MediaSummary> {
    let bar = Mutex::new(None::<ProgressBar>);
    let stored = AtomicU64::new(0);
    let on_progress = |event: Progress| {
        let Ok(mut bar) = bar.lock() else { return };
        match event {
            Progress::Start { kind, n_tasks } => {
                let message = match kind {
                    MediaSourceKind::WebDataset => {
                        "Preparing webdataset and computing media metadata..."
                    }
                    MediaSourceKind::Folder => {
                        "Preparing filesystem dataset and computing media metadata..."
                    }
                };
                // (A closed stdout is noticed by the report at the end.)
                let _ = writeln!(std::io::stdout().lock(), "{message}");
                if !show_progress {
                    return;
                }
                let unit = match kind {
                    MediaSourceKind::WebDataset => "shards",
                    MediaSourceKind::Folder => "files",
                };
                let pb = ProgressBar::with_draw_target(
                    Some(n_tasks as u64),
                    ProgressDrawTarget::stderr(),
                );
                pb.set_style(
                    ProgressStyle::with_template(&format!(
                        "{{bar:40}} {{pos}}/{{len}} {unit}, {{msg}} [{{elapsed_precise}}, eta {{eta}}]"
                    ))
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                *bar = Some(pb);
            }
            Progress::Task { n_stored } => {
                let total = stored.fetch_add(n_stored, Ordering::Relaxed) + n_stored;
                if let Some(pb) = bar.as_ref() {
                    pb.inc(1);
                    pb.set_message(format!("{total} entries stored"));
                }
            }
        }
    };
    let res = prepare_media(path, &options, &on_progress)
        .with_context(|| format!("while computing media metadata of {}", path.display()));
    if let Ok(Some(pb)) = bar.lock().map(|mut b| b.take()) {
        pb.finish_and_clear();
    }
    res
}

/// Prints the outcome: the number of stored entries (as the reference does) and, on standard
/// error, the entries that were skipped with their reasons.
pub(crate) fn report(summary: &MediaSummary) -> anyhow::Result<()> {
    outln!("Done. Stored metadata for {} files.", summary.n_stored);
    if summary.n_skipped == 0 {
        return Ok(());
    }
    eprintln!(
        "Skipped {} media entries whose metadata could not be read{}:",
        summary.n_skipped,
        if summary.n_skipped as usize > SKIPPED_SHOWN {
            format!(" (the first {SKIPPED_SHOWN} follow; ENERGON_LOG=debug lists all)")
        } else {
            String::new()
        }
    );
    for skipped in summary.skipped.iter().take(SKIPPED_SHOWN) {
        eprintln!("  {}: {}", skipped.entry_key, skipped.reason);
    }
    Ok(())
}
