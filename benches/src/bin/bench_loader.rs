//! `bench-loader`: whole-loader throughput (samples/s) and peak memory on a generated dataset,
//! raw and with image decoding, without and with worker threads.

use std::{path::PathBuf, sync::Arc};

use clap::Parser;
use energon_cook::LoaderBuilder;
use energon_dist::WorkerConfig;
use energon_index::{
    DATASET_YAML, INFO_JSON, NV_META,
    dataset_config::write_standard_dataset_yaml,
    prepare::{PrepareOptions, prepare_dataset},
};
use energon_reader::{Dataset, Decoder, ImageDecode, ReaderOptions, SampleReader};
use energon_tests::WdsSpec;

/// Load a generated, prepared dataset (64x64 JPEG + txt + json per sample) with the training
/// loader and report samples/s and peak memory per configuration.
#[derive(Debug, Parser)]
struct Args {
    /// Where the dataset is generated and prepared (reused when it already matches).
    #[arg(long, default_value = "/tmp/energon-bench-loader")]
    dir: PathBuf,
    /// Samples in the dataset.
    #[arg(long, default_value_t = 100_000)]
    dataset_samples: usize,
    /// Number of shards.
    #[arg(long, default_value_t = 200)]
    shards: usize,
    /// Samples loaded per configuration.
    #[arg(long, default_value_t = 50_000)]
    samples: u64,
    /// Batch size.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Shuffle buffer size.
    #[arg(long, default_value_t = 0)]
    shuffle_buffer_size: usize,
    /// Image decode mode for the decoding configurations.
    #[arg(long, default_value = "rgb8")]
    image_decode: String,
    /// Print one JSON line per configuration.
    #[arg(long)]
    json: bool,
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let spec = WdsSpec {
        shards: args.shards,
        per_shard: args.dataset_samples / args.shards,
        img: 64,
        ..WdsSpec::default()
    };
    energon_bench::ensure_dataset(&args.dir, &spec)?;
    let meta = args.dir.join(NV_META);
    if !meta.join(INFO_JSON).is_file() {
        prepare_dataset(&args.dir, &PrepareOptions::default(), &|_| {})?;
    }
    if !meta.join(DATASET_YAML).is_file() {
        let field_map = [("image", "jpg"), ("caption", "txt")].map(|(k, v)| (k.into(), v.into()));
        write_standard_dataset_yaml(&meta.join(DATASET_YAML), "CaptioningSample", &field_map)?;
    }
    let image: ImageDecode = args.image_decode.parse().map_err(anyhow::Error::msg)?;
    for (decode, num_workers) in [(false, 0), (false, 2), (true, 0), (true, 2)] {
        let reset = energon_bench::reset_peak_rss();
        let open = energon_bench::open_options(&args.dir, num_workers)?;
        let (rate, first_s) = if decode {
            let mut options = ReaderOptions::default();
            options.decoder = Some(Decoder { image, ..Decoder::default() });
            options.max_open_shards = open.max_open_shards;
            let reader = Arc::new(SampleReader::open(&args.dir, &options)?);
            let dataset = Arc::clone(reader.dataset());
            let builder =
                LoaderBuilder::new(dataset, WorkerConfig::new(0, 1, num_workers)?, move |raw| {
                    Ok(Some(reader.build(&raw)?))
                });
            energon_bench::steady_rate(
                builder,
                args.batch_size,
                args.shuffle_buffer_size,
                args.samples,
            )?
        } else {
            let dataset = Arc::new(Dataset::open(&args.dir, &open)?);
            let builder =
                LoaderBuilder::new(dataset, WorkerConfig::new(0, 1, num_workers)?, |raw| {
                    Ok(Some(energon_bench::touch_pages(&raw)))
                });
            energon_bench::steady_rate(
                builder,
                args.batch_size,
                args.shuffle_buffer_size,
                args.samples,
            )?
        };
        let peak = if reset { energon_bench::peak_rss_mb() } else { None };
        let mode = if decode { args.image_decode.as_str() } else { "raw" };
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "decode": mode, "num_workers": num_workers, "batch_size": args.batch_size,
                    "samples": args.samples, "samples_per_s": rate, "first_batch_s": first_s,
                    "peak_rss_mb": peak,
                })
            );
        } else {
            println!(
                "loader {mode:>9}, {num_workers} workers, batch {}: {rate:>9.0} samples/s, first batch {first_s:.3} s, peak RSS {}",
                args.batch_size,
                peak.map_or("n/a".to_owned(), |p| format!("{p:.1} MiB"))
            );
        }
    }
    Ok(())
}
