//! Whole-pipeline benchmarks for energon-rs, and the measuring helpers they share.

use std::{fs, path::Path, time::Instant};

use energon_cook::{LoaderBuilder, LoaderSpec};
use energon_dist::WorkerConfig;
use energon_reader::{OpenOptions, RawSample};
use energon_tests::WdsSpec;

/// How a training loader of `num_workers` workers opens `path`'s raw samples: as many shard
/// maps as its workers read slices at once (the loaders' one rule, [`LoaderSpec::max_open_shards`]).
pub fn open_options(path: &Path, num_workers: usize) -> anyhow::Result<OpenOptions> {
    let spec = LoaderSpec::new(path, WorkerConfig::new(0, 1, num_workers)?);
    let mut options = OpenOptions::default();
    options.max_open_shards = spec.max_open_shards();
    Ok(options)
}

/// Peak resident set size of this process in MiB (`VmHWM`), if the platform reports it.
pub fn peak_rss_mb() -> Option<f64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// CPU time (user plus system, all threads) this process used so far, in seconds, from
/// `/proc/self/stat` (Linux clock ticks of 1/100 s); on a busy machine a fairer measure of the
/// work done than wall time.
pub fn cpu_seconds() -> Option<f64> {
    let stat = fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// Resets the peak resident set size, so that a following [`peak_rss_mb`] measures only what comes
/// after (Linux `clear_refs`); returns whether it worked.
pub fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Generates the benchmark WebDataset into `dir` unless a complete one is already there.
pub fn ensure_dataset(dir: &Path, spec: &WdsSpec) -> anyhow::Result<()> {
    let last = dir.join(&spec.subdir).join(format!("{}{:06}.tar", spec.prefix, spec.shards - 1));
    let marker = dir.join(".bench-spec");
    let want = format!("{spec:?}");
    if last.is_file() && fs::read_to_string(&marker).is_ok_and(|s| s == want) {
        return Ok(());
    }
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    energon_tests::write_wds(dir, spec)?;
    fs::write(marker, want)?;
    Ok(())
}

/// A byte of every page of a raw sample's parts, summed: what a benchmark does with a sample so
/// that its data is really read.
pub fn touch_pages(raw: &RawSample) -> u64 {
    raw.parts.iter().flat_map(|p| p.data.iter().step_by(4096)).map(|&b| u64::from(b)).sum()
}

/// Loads `samples` samples from `builder` in batches of `batch_size`; returns the steady
/// samples/s (after the first batch) and the seconds to the first batch.
pub fn steady_rate<T: Send + 'static>(
    builder: LoaderBuilder<T>,
    batch_size: usize,
    shuffle_buffer_size: usize,
    samples: u64,
) -> anyhow::Result<(f64, f64)> {
    let start = Instant::now();
    let loader = builder
        .batch_size(Some(batch_size))
        .shuffle_buffer_size(shuffle_buffer_size)
        .build_batches()?;
    let mut n = 0u64;
    let mut first = None;
    for batch in loader {
        n += batch?.value.value.len() as u64;
        if first.is_none() {
            first = Some((Instant::now(), n));
        }
        if n >= samples {
            break;
        }
    }
    let end = Instant::now();
    let (first_at, first_n) = first.unwrap_or((end, 0));
    let steady = (n - first_n) as f64 / end.duration_since(first_at).as_secs_f64().max(1e-9);
    Ok((steady, first_at.duration_since(start).as_secs_f64()))
}
