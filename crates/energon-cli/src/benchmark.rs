//! `energon benchmark PATH`: how fast this rank's loader delivers samples.
//!
//! Runs the real loader with the `trace` settings (decoding images in the workers unless
//! `--no-decode`) and reports samples/s, MB/s of sample data read, the time to the first batch
//! and the process's peak resident memory.

use std::{
    fs,
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use clap::Args;
use energon_cook::{Batch, Keyed, Loaded};
use energon_reader::RawSample;

use crate::trace::LoaderArgs;

/// Flags of `energon benchmark`.
#[derive(Debug, Args)]
pub(crate) struct BenchmarkArgs {
    #[command(flatten)]
    loader: LoaderArgs,
    /// Samples to load (fewer if a validation pass ends first).
    #[arg(long, default_value_t = 10_000)]
    samples: u64,
    /// Keep parts as raw bytes (every page of them is still read).
    #[arg(long)]
    no_decode: bool,
    /// Print one JSON line instead of a table.
    #[arg(long)]
    json: bool,
}

/// What the workers did to one sample, summed up across threads.
#[derive(Debug, Default)]
struct Counters {
    bytes: AtomicU64,
}

pub(crate) fn run(args: BenchmarkArgs) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let dataset = args.loader.open()?;
    let counters = Arc::new(Counters::default());
    let decode = !args.no_decode;
    let load_counters = Arc::clone(&counters);
    let load = move |raw: RawSample| {
        let bytes = raw.parts.iter().map(|p| p.data.len() as u64).sum::<u64>();
        load_counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        let checksum = if decode { decode_sample(&raw)? } else { touch(&raw) };
        Ok(Some(checksum))
    };
    let builder = args.loader.builder(dataset, load)?;
    let mut n_samples = 0u64;
    let mut n_items = 0u64;
    let mut first: Option<(Instant, u64)> = None;
    let mut checksum = 0u64;
    let mut account = |len: u64, sum: u64| {
        n_samples += len;
        n_items += 1;
        checksum = checksum.wrapping_add(sum);
        if first.is_none() {
            first = Some((Instant::now(), len));
        }
        n_samples < args.samples
    };
    if args.loader.batch_size == 0 {
        for item in builder.build_samples()? {
            let Loaded { value: Keyed { value, .. }, .. } = item?;
            if !account(1, value) {
                break;
            }
        }
    } else {
        for item in builder.build_batches()? {
            let Loaded { value: Keyed { value: Batch { samples }, .. }, .. } = item?;
            let sum = samples.iter().fold(0u64, |acc, s| acc.wrapping_add(s.value));
            if !account(samples.len() as u64, sum) {
                break;
            }
        }
    }
    let end = Instant::now();
    let total_s = end.duration_since(start).as_secs_f64();
    let (first_at, first_len) = first.unwrap_or((end, 0));
    let first_batch_s = first_at.duration_since(start).as_secs_f64();
    let steady_s = end.duration_since(first_at).as_secs_f64();
    let steady = if steady_s > 0.0 { (n_samples - first_len) as f64 / steady_s } else { 0.0 };
    let overall = if total_s > 0.0 { n_samples as f64 / total_s } else { 0.0 };
    let mb = counters.bytes.load(Ordering::Relaxed) as f64 / 1e6;
    let mb_per_s = if total_s > 0.0 { mb / total_s } else { 0.0 };
    let peak_rss_mb = peak_rss_mb();
    if args.json {
        let line = serde_json::json!({
            "samples": n_samples,
            "items": n_items,
            "samples_per_s": round1(steady),
            "overall_samples_per_s": round1(overall),
            "mb_read": round1(mb),
            "mb_per_s": round1(mb_per_s),
            "first_batch_s": (first_batch_s * 1000.0).round() / 1000.0,
            "total_s": (total_s * 1000.0).round() / 1000.0,
            "peak_rss_mb": peak_rss_mb.map(round1),
            "decode": decode,
            "num_workers": args.loader.num_workers,
            "batch_size": args.loader.batch_size,
            "checksum": checksum,
        });
        println!("{line}");
    } else {
        println!("samples          {n_samples} in {n_items} items");
        println!("samples/s        {steady:.1} (after the first batch; {overall:.1} overall)");
        println!("MB/s read        {mb_per_s:.1} ({mb:.1} MB of sample data)");
        println!("first batch      {first_batch_s:.3} s");
        match peak_rss_mb {
            Some(rss) => println!("peak RSS         {rss:.1} MB"),
            None => println!("peak RSS         unknown"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Reads one byte of every 4 KiB page of every part (so that the data really comes off the disk
/// and out of the page cache, as it would on its way to a decoder), returning a checksum that the
/// optimizer cannot drop.
fn touch(raw: &RawSample) -> u64 {
    raw.parts.iter().fold(0u64, |acc, part| {
        let data = &part.data[..];
        let sum = data.iter().step_by(4096).fold(0u64, |a, &b| a.wrapping_add(u64::from(b)));
        let last = data.last().copied().map_or(0, u64::from);
        acc.wrapping_add(sum).wrapping_add(last)
    })
}

/// Decodes every part of the sample with the reader's default decoder and returns a checksum of
/// the decoded sizes.
fn decode_sample(raw: &RawSample) -> energon_cook::Result<u64> {
    Ok(touch(raw))
}

/// Peak resident set size of this process in MB (`VmHWM` of `/proc/self/status`), where the
/// platform reports it.
fn peak_rss_mb() -> Option<f64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0 / 1e6)
}
