//! `energon benchmark PATH`: how fast this rank's loader delivers samples.
//!
//! Runs the real loader with the `trace` settings, reading and decoding each sample as its
//! `dataset.yaml` says (in the workers) unless `--no-decode`, and reports samples/s, MB/s of
//! sample data read, the time to the first batch and the process's peak resident memory.

use std::{
    fs,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use anyhow::Context;
use clap::Args;
use energon_cook::{Batch, Keyed, Loaded, LoaderBuilder};
use energon_reader::{Decoder, ImageDecode, RawSample, Sample, SampleReader};

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
    /// How images are decoded (rgb8, torchrgb, torchrgb8, l8, ...).
    #[arg(long, default_value = "rgb8")]
    image_decode: String,
    /// Print one JSON line instead of a table.
    #[arg(long)]
    json: bool,
}

/// What was measured.
#[derive(Debug, Default)]
struct Measured {
    n_samples: u64,
    n_items: u64,
    total_s: f64,
    first_batch_s: f64,
    steady_samples_per_s: f64,
    checksum: u64,
}

pub(crate) fn run(args: BenchmarkArgs) -> anyhow::Result<u8> {
    let start = Instant::now();
    let bytes_read = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&bytes_read);
    let count = move |raw: &RawSample| {
        let bytes = raw.parts.iter().map(|p| p.data.len() as u64).sum::<u64>();
        counter.fetch_add(bytes, Ordering::Relaxed);
    };
    let mut spec = args.loader.spec()?;
    let measured = if args.no_decode {
        let dataset = args.loader.open(&spec)?;
        let builder = args.loader.builder(&spec, dataset, move |raw: RawSample| {
            count(&raw);
            Ok(Some(touch(&raw)))
        });
        measure(&args, builder, start, |&sum| sum)?
    } else {
        let image: ImageDecode = args.image_decode.parse().map_err(anyhow::Error::msg)?;
        spec.decoder = Some(Decoder { image, ..Decoder::default() });
        let reader = SampleReader::open(&args.loader.path, &spec.reader_options())
            .with_context(|| format!("cannot open {}", args.loader.path.display()))?;
        let reader = Arc::new(reader);
        let dataset = Arc::clone(reader.dataset());
        // Decoding happens here, on the worker threads.
        let builder = args.loader.builder(&spec, dataset, move |raw: RawSample| {
            count(&raw);
            Ok(Some(reader.build(&raw)?))
        });
        measure(&args, builder, start, |sample: &Sample| sample.key().len() as u64)?
    };
    let Measured { n_samples, n_items, total_s, first_batch_s, .. } = measured;
    let overall = if total_s > 0.0 { n_samples as f64 / total_s } else { 0.0 };
    let steady = measured.steady_samples_per_s;
    let mb = bytes_read.load(Ordering::Relaxed) as f64 / 1e6;
    let mb_per_s = if total_s > 0.0 { mb / total_s } else { 0.0 };
    let peak_rss_mb = peak_rss_mb();
    let decode = (!args.no_decode).then_some(args.image_decode.as_str());
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
            "checksum": measured.checksum,
        });
        outln!("{line}");
    } else {
        outln!("samples          {n_samples} in {n_items} items");
        outln!("samples/s        {steady:.1} (after the first batch; {overall:.1} overall)");
        outln!("MB/s read        {mb_per_s:.1} ({mb:.1} MB of sample data)");
        outln!("first batch      {first_batch_s:.3} s");
        match peak_rss_mb {
            Some(rss) => outln!("peak RSS         {rss:.1} MB"),
            None => outln!("peak RSS         unknown"),
        }
    }
    Ok(0)
}

/// Pulls samples (or batches) from the loader until `args.samples` samples have come out.
fn measure<T: Send + 'static>(
    args: &BenchmarkArgs,
    builder: LoaderBuilder<T>,
    start: Instant,
    checksum_of: impl Fn(&T) -> u64,
) -> anyhow::Result<Measured> {
    let mut res = Measured::default();
    let mut first: Option<(Instant, u64)> = None;
    let mut account = |samples: &[&T]| {
        res.n_samples += samples.len() as u64;
        res.n_items += 1;
        for sample in samples {
            res.checksum = res.checksum.wrapping_add(checksum_of(sample));
        }
        if first.is_none() {
            first = Some((Instant::now(), samples.len() as u64));
        }
        res.n_samples < args.samples
    };
    if args.loader.batch_size == 0 {
        for item in builder.build_samples()? {
            let Loaded { value: Keyed { value, .. }, .. } = item?;
            if !account(&[&value]) {
                break;
            }
        }
    } else {
        for item in builder.build_batches()? {
            let Loaded { value: Keyed { value: Batch { samples }, .. }, .. } = item?;
            let samples: Vec<&T> = samples.iter().map(|s| &s.value).collect();
            if !account(&samples) {
                break;
            }
        }
    }
    let end = Instant::now();
    res.total_s = end.duration_since(start).as_secs_f64();
    let (first_at, first_len) = first.unwrap_or((end, 0));
    res.first_batch_s = first_at.duration_since(start).as_secs_f64();
    let steady_s = end.duration_since(first_at).as_secs_f64();
    if steady_s > 0.0 {
        res.steady_samples_per_s = (res.n_samples - first_len) as f64 / steady_s;
    }
    Ok(res)
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

/// Peak resident set size of this process in MB (`VmHWM` of `/proc/self/status`), where the
/// platform reports it.
fn peak_rss_mb() -> Option<f64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0 / 1e6)
}
