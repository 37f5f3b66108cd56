//! `bench-prepare`: times `prepare` on a generated WebDataset and reports samples/s and peak memory.

use std::{path::PathBuf, time::Instant};

use clap::Parser;
use energon_index::prepare::{PrepareOptions, SplitChoice, prepare_dataset};
use energon_tests::WdsSpec;

/// Prepare a generated dataset (64x64 JPEG + txt + json per sample) and report its throughput.
#[derive(Debug, Parser)]
struct Args {
    /// Where the dataset is generated (reused when it already matches).
    #[arg(long, default_value = "/tmp/energon-bench-prepare")]
    dir: PathBuf,
    /// Total samples.
    #[arg(long, default_value_t = 100_000)]
    samples: usize,
    /// Number of shards.
    #[arg(long, default_value_t = 200)]
    shards: usize,
    /// Prepare workers.
    #[arg(long, default_value_t = 16)]
    num_workers: usize,
    /// Timed repetitions (the best is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Print one JSON line instead of text.
    #[arg(long)]
    json: bool,
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let spec = WdsSpec {
        shards: args.shards,
        per_shard: args.samples / args.shards,
        img: 64,
        ..WdsSpec::default()
    };
    energon_bench::ensure_dataset(&args.dir, &spec)?;
    let options = PrepareOptions::default()
        .split(SplitChoice::Ratio([8.0, 1.0, 1.0]))
        .num_workers(args.num_workers);
    let mut best = f64::INFINITY;
    let mut n_samples = 0;
    let reset = energon_bench::reset_peak_rss();
    for _ in 0..args.repeat.max(1) {
        let t0 = Instant::now();
        let summary = prepare_dataset(&args.dir, &options, &|_| {})?;
        best = best.min(t0.elapsed().as_secs_f64());
        n_samples = summary.n_samples();
    }
    let peak = if reset { energon_bench::peak_rss_mb() } else { None };
    let rate = n_samples as f64 / best;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "samples": n_samples, "shards": args.shards, "seconds": best,
                "samples_per_s": rate, "peak_rss_mb": peak,
            })
        );
    } else {
        println!(
            "prepare: {n_samples} samples in {} shards: {best:.3} s, {rate:.0} samples/s, peak RSS {}",
            args.shards,
            peak.map_or("n/a".to_owned(), |p| format!("{p:.1} MiB"))
        );
    }
    Ok(())
}
