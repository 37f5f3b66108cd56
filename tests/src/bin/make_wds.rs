//! `make-wds`: writes a deterministic synthetic WebDataset (or JSONL file) for demos and benchmarks.

use std::path::PathBuf;

use clap::Parser;
use energon_tests::{TarFormat, WdsSpec};

/// Write a deterministic synthetic WebDataset: KEY.jpg, KEY.txt and KEY.json per sample.
#[derive(Debug, Parser)]
#[command(name = "make-wds")]
struct Args {
    /// Output folder.
    out_dir: PathBuf,
    /// Number of tar shards.
    #[arg(long, default_value_t = 4)]
    shards: usize,
    /// Samples per shard.
    #[arg(long, default_value_t = 50)]
    per_shard: usize,
    /// Image side length in pixels.
    #[arg(long, default_value_t = 32)]
    img: u32,
    /// Content seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// JPEG quality.
    #[arg(long, default_value_t = 85)]
    quality: u8,
    /// Sub folder for the shards ('' for the output folder itself).
    #[arg(long, default_value = "shards")]
    subdir: String,
    /// Shard file name prefix.
    #[arg(long, default_value = "data-")]
    prefix: String,
    /// Tar header flavour: ustar, gnu or pax.
    #[arg(long, default_value = "ustar")]
    tar_format: String,
    /// Write OUT_DIR/data.jsonl instead of tar shards.
    #[arg(long)]
    jsonl: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tar_format = match args.tar_format.as_str() {
        "ustar" => TarFormat::Ustar,
        "gnu" => TarFormat::Gnu,
        "pax" => TarFormat::Pax,
        other => anyhow::bail!("unknown tar format {other:?} (expected ustar, gnu or pax)"),
    };
    let spec = WdsSpec {
        shards: args.shards,
        per_shard: args.per_shard,
        img: args.img,
        seed: args.seed,
        quality: args.quality,
        subdir: args.subdir,
        prefix: args.prefix,
        tar_format,
    };
    if args.jsonl {
        let path = energon_tests::write_jsonl(&args.out_dir, &spec)?;
        #[allow(clippy::print_stderr)]
        {
            eprintln!("wrote {}", path.display());
        }
    } else {
        let shards = energon_tests::write_wds(&args.out_dir, &spec)?;
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "wrote {} shards x {} samples to {}",
                shards.len(),
                spec.per_shard,
                args.out_dir.display()
            );
        }
    }
    Ok(())
}
