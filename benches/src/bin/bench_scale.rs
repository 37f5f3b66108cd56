//! `bench-scale`: prepare and loader start-up at 10^5 to 10^7 samples of tiny one-part samples.
//!
//! For each size it generates a WebDataset of one `.txt` member per sample into a temporary
//! folder, prepares it (with and without the per-sample tables of `index.sqlite`), starts a
//! loader on it, and deletes it. Every measured step runs in a child process of this binary, so
//! that its peak RSS is its own. `writer` measures the `index.sqlite` writer alone on rows made in
//! memory: the ceiling of a full prepare.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::Instant,
};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use energon_cook::LoaderBuilder;
use energon_dist::WorkerConfig;
use energon_index::{
    INDEX_SQLITE, NV_META, PartEntry, SampleEntry, ShardScan, SqliteIndexWriter,
    prepare::{PrepareOptions, prepare_dataset},
};
use energon_reader::Dataset;
use energon_tests::TarFormat;
use serde_json::{Value, json};

#[derive(Debug, Parser)]
struct Args {
    #[command(subcommand)]
    command: Option<Step>,
    #[command(flatten)]
    run: RunArgs,
}

/// Generate, prepare and load datasets of each size; print one line (or JSON object) per step.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Dataset sizes in samples, comma separated.
    #[arg(long, default_value = "100000,1000000,10000000", value_delimiter = ',')]
    sizes: Vec<u64>,
    /// Samples per shard.
    #[arg(long, default_value_t = 1000)]
    per_shard: u64,
    /// Content bytes of each sample's one part.
    #[arg(long, default_value_t = 8)]
    payload: usize,
    /// Keys in a scrambled order (a bijective hash of the sample number) instead of ascending.
    #[arg(long)]
    random_keys: bool,
    /// Prepare workers.
    #[arg(long, default_value_t = 16)]
    num_workers: usize,
    /// Where the temporary datasets go (a new folder inside it, deleted at the end).
    #[arg(long)]
    tmp: Option<PathBuf>,
    /// Loader start-up only, at these sizes, on shards that are hard links to a few real ones
    /// (so that 10^8 samples take no disk space); comma separated.
    #[arg(long, value_delimiter = ',')]
    linked_sizes: Vec<u64>,
    /// Print JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

/// One measured step, run in its own process.
#[derive(Debug, Subcommand)]
enum Step {
    /// Write `samples` tiny samples into `dir`.
    Generate {
        dir: PathBuf,
        #[arg(long)]
        samples: u64,
        #[arg(long, default_value_t = 1000)]
        per_shard: u64,
        #[arg(long, default_value_t = 8)]
        payload: usize,
        #[arg(long)]
        random_keys: bool,
    },
    /// Prepare `dir`.
    Prepare {
        dir: PathBuf,
        #[arg(long, default_value_t = 16)]
        num_workers: usize,
        /// Without the per-sample tables of index.sqlite (`--no-sample-tables`).
        #[arg(long)]
        skip_tables: bool,
    },
    /// Start a loader on `dir` and time its first batch (and a few more).
    Load {
        dir: PathBuf,
        #[arg(long, default_value_t = 1)]
        world_size: usize,
        #[arg(long, default_value_t = 2)]
        num_workers: usize,
        #[arg(long, default_value_t = 32)]
        batch_size: usize,
        #[arg(long, default_value_t = 100)]
        batches: u64,
    },
    /// A prepared dataset of `samples` whose shards are hard links to a few real ones.
    Linked {
        dir: PathBuf,
        #[arg(long)]
        samples: u64,
        #[arg(long, default_value_t = 1000)]
        per_shard: u64,
    },
    /// The index.sqlite writer alone, on rows made in memory.
    Writer {
        /// Temporary folder for the database.
        dir: PathBuf,
        #[arg(long)]
        samples: u64,
        #[arg(long, default_value_t = 1000)]
        per_shard: u64,
        #[arg(long)]
        random_keys: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let res = match args.command {
        None => return run(&args.run),
        Some(Step::Generate { dir, samples, per_shard, payload, random_keys }) => {
            generate(&dir, samples, per_shard, payload, random_keys)?
        }
        Some(Step::Prepare { dir, num_workers, skip_tables }) => {
            let options =
                PrepareOptions::default().num_workers(num_workers).sample_tables(!skip_tables);
            let t0 = Instant::now();
            let summary = prepare_dataset(&dir, &options, &|_| {})?;
            let seconds = t0.elapsed().as_secs_f64();
            let db = dir.join(NV_META).join(INDEX_SQLITE);
            json!({
                "seconds": seconds, "samples": summary.n_samples(),
                "index_sqlite_bytes": fs::metadata(db).map_or(0, |m| m.len()),
            })
        }
        Some(Step::Load { dir, world_size, num_workers, batch_size, batches }) => {
            load(&dir, world_size, num_workers, batch_size, batches)?
        }
        Some(Step::Linked { dir, samples, per_shard }) => linked(&dir, samples, per_shard)?,
        Some(Step::Writer { dir, samples, per_shard, random_keys }) => {
            writer(&dir, samples, per_shard, random_keys)?
        }
    };
    let mut res = res;
    res["peak_rss_mb"] = json!(energon_bench::peak_rss_mb());
    res["cpu_s"] = json!(energon_bench::cpu_seconds());
    #[allow(clippy::print_stdout)]
    {
        println!("{res}");
    }
    Ok(())
}

/// Sample key `n` of the dataset: ascending, or scrambled by a bijection (so still unique).
fn key(n: u64, random_keys: bool) -> String {
    if random_keys {
        // splitmix64's finaliser: a bijection of u64.
        let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        format!("{:016x}", z ^ (z >> 31))
    } else {
        format!("{n:012}")
    }
}

fn generate(
    dir: &Path,
    samples: u64,
    per_shard: u64,
    payload: usize,
    random_keys: bool,
) -> anyhow::Result<Value> {
    let t0 = Instant::now();
    let shards = samples.div_ceil(per_shard);
    let shard_dir = dir.join("shards");
    fs::create_dir_all(&shard_dir)?;
    let data = vec![b'x'; payload];
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let n_threads = 2u64;
        let workers: Vec<_> = (0..n_threads)
            .map(|t| {
                let (shard_dir, data) = (&shard_dir, &data);
                scope.spawn(move || -> anyhow::Result<()> {
                    for s in (t..shards).step_by(n_threads as usize) {
                        let n = (samples - s * per_shard).min(per_shard);
                        let members: Vec<(String, Vec<u8>)> = (0..n)
                            .map(|i| {
                                (
                                    format!("{}.txt", key(s * per_shard + i, random_keys)),
                                    data.clone(),
                                )
                            })
                            .collect();
                        let path = shard_dir.join(format!("part-{s:06}.tar"));
                        energon_tests::write_tar(&path, TarFormat::Ustar, &members)
                            .with_context(|| format!("writing {}", path.display()))?;
                    }
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| anyhow::anyhow!("a generator thread panicked"))??;
        }
        Ok(())
    })?;
    Ok(json!({ "seconds": t0.elapsed().as_secs_f64(), "shards": shards }))
}

fn load(
    dir: &Path,
    world_size: usize,
    num_workers: usize,
    batch_size: usize,
    batches: u64,
) -> anyhow::Result<Value> {
    let t0 = Instant::now();
    let dataset = Arc::new(Dataset::open(dir, &energon_bench::open_options(dir, num_workers)?)?);
    let builder = LoaderBuilder::new(dataset, WorkerConfig::new(0, world_size, num_workers)?, {
        |raw| Ok(Some(raw.parts.iter().map(|p| p.data.len()).sum::<usize>()))
    });
    let loader = builder.batch_size(Some(batch_size)).build_batches()?;
    let mut first = None;
    let mut n = 0;
    for batch in loader {
        batch?;
        n += 1;
        first.get_or_insert_with(|| t0.elapsed().as_secs_f64());
        if n >= batches {
            break;
        }
    }
    Ok(json!({ "first_batch_s": first, "batches": n, "seconds": t0.elapsed().as_secs_f64() }))
}

/// How many names one real shard gets at most (file systems limit the links of a file).
const LINKS_PER_SHARD: u64 = 50_000;

fn linked(dir: &Path, samples: u64, per_shard: u64) -> anyhow::Result<Value> {
    use energon_index::{info, split};
    let t0 = Instant::now();
    let shards = samples / per_shard;
    let n_real = shards.div_ceil(LINKS_PER_SHARD);
    generate(dir, n_real * per_shard, per_shard, 8, false)?;
    prepare_dataset(dir, &PrepareOptions::default().sample_tables(false), &|_| {})?;
    let name = |s: u64| format!("shards/part-{s:06}.tar");
    for s in n_real..shards {
        let real = dir.join(name(s % n_real));
        fs::hard_link(&real, dir.join(name(s)))?;
        fs::hard_link(real.with_extension("tar.idx"), dir.join(format!("{}.idx", name(s))))?;
    }
    let names: Vec<String> = (0..shards).map(name).collect();
    let shard_counts = names.iter().map(|n| (n.clone(), per_shard)).collect();
    let meta = dir.join(NV_META);
    let info = info::DatasetInfo { energon_version: None, shard_counts };
    info::write_info_json(&meta.join(energon_index::INFO_JSON), &info)?;
    let config = split::SplitConfig {
        split_parts: vec![("train".to_owned(), split::collapse(&names))],
        exclude: Vec::new(),
    };
    let split_yaml = energon_index::SPLIT_YAML;
    fs::write(meta.join(split_yaml), split::split_config_bytes(&config, split_yaml)?)?;
    Ok(json!({ "seconds": t0.elapsed().as_secs_f64(), "shards": shards }))
}

fn writer(dir: &Path, samples: u64, per_shard: u64, random_keys: bool) -> anyhow::Result<Value> {
    fs::create_dir_all(dir)?;
    let db = dir.join("writer.sqlite");
    let _ = fs::remove_file(&db);
    let t0 = Instant::now();
    let mut writer = SqliteIndexWriter::create(&db)?;
    let shards = samples.div_ceil(per_shard);
    for s in 0..shards {
        let n = (samples - s * per_shard).min(per_shard);
        let scan = ShardScan {
            samples: (0..n)
                .map(|i| SampleEntry {
                    key: key(s * per_shard + i, random_keys),
                    offset: i * 1024,
                    parts: vec![PartEntry {
                        name: "txt".to_owned(),
                        offset_data: i * 1024 + 512,
                        size: 8,
                    }],
                })
                .collect(),
            end_offset: n * 1024,
            trailer: Default::default(),
            version: None,
        };
        writer.add_shard(s, &format!("shards/part-{s:06}.tar"), &scan)?;
    }
    writer.finish()?;
    let seconds = t0.elapsed().as_secs_f64();
    let bytes = fs::metadata(&db)?.len();
    fs::remove_file(&db)?;
    Ok(json!({ "seconds": seconds, "samples": samples, "index_sqlite_bytes": bytes }))
}

/// Runs `step` of this binary in a child process and returns its JSON result.
fn child(step: &[String]) -> anyhow::Result<Value> {
    let exe = std::env::current_exe()?;
    let out = Command::new(&exe).args(step).output()?;
    if !out.status.success() {
        bail!("{} {}: {}", exe.display(), step.join(" "), String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8(out.stdout)?;
    let line = text.lines().last().context("a step printed nothing")?;
    Ok(serde_json::from_str(line)?)
}

fn run(args: &RunArgs) -> anyhow::Result<()> {
    let base = args.tmp.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new().prefix("energon-bench-scale-").tempdir_in(&base)?;
    let s = |v: &dyn ToString| v.to_string();
    let keys: &[&str] = if args.random_keys { &["--random-keys"] } else { &[] };
    for &size in &args.sizes {
        let dir = tmp.path().join(format!("wds-{size}"));
        let dir_s = dir.display().to_string();
        let mut step = vec![s(&"writer"), dir_s.clone(), s(&"--samples"), s(&size)];
        step.extend(["--per-shard".to_owned(), s(&args.per_shard)]);
        step.extend(keys.iter().map(|k| s(k)));
        report(args, size, "sqlite writer alone", &child(&step)?);
        let mut step = vec![s(&"generate"), dir_s.clone(), s(&"--samples"), s(&size)];
        step.extend(["--per-shard".to_owned(), s(&args.per_shard)]);
        step.extend(["--payload".to_owned(), s(&args.payload)]);
        step.extend(keys.iter().map(|k| s(k)));
        child(&step)?;
        for (what, skip) in [("prepare", false), ("prepare, no sample tables", true)] {
            let mut step = vec![s(&"prepare"), dir_s.clone(), s(&"--num-workers")];
            step.push(s(&args.num_workers));
            if skip {
                step.push(s(&"--skip-tables"));
            }
            report(args, size, what, &child(&step)?);
        }
        report(args, size, "loader", &child(&[s(&"load"), dir_s.clone()])?);
        fs::remove_dir_all(&dir)?;
    }
    for &size in &args.linked_sizes {
        let dir = tmp.path().join(format!("linked-{size}"));
        let dir_s = dir.display().to_string();
        let step = [s(&"linked"), dir_s.clone(), s(&"--samples"), s(&size)];
        child(&[step.as_slice(), &["--per-shard".to_owned(), s(&args.per_shard)]].concat())?;
        report(args, size, "loader, linked shards", &child(&[s(&"load"), dir_s])?);
        fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

#[allow(clippy::print_stdout)]
fn report(args: &RunArgs, size: u64, what: &str, res: &Value) {
    if args.json {
        let mut res = res.clone();
        res["step"] = json!(what);
        res["size"] = json!(size);
        println!("{res}");
        return;
    }
    let mb = |v: &Value| v.as_f64().map_or("n/a".to_owned(), |x| format!("{x:.1} MiB"));
    let mut line = format!("{size:>9} samples, {what:<22}");
    if let Some(first) = res["first_batch_s"].as_f64() {
        line += &format!(
            " first batch {first:.3} s, {} batches in {:.3} s",
            res["batches"],
            res["seconds"].as_f64().unwrap_or(0.0)
        );
    } else if let Some(secs) = res["seconds"].as_f64() {
        line += &format!(" {secs:>7.2} s, {:>9.0} samples/s", size as f64 / secs);
    }
    if let Some(cpu) = res["cpu_s"].as_f64() {
        line += &format!(", CPU {cpu:.2} s ({:.2} us/sample)", cpu * 1e6 / size as f64);
    }
    line += &format!(", peak RSS {}", mb(&res["peak_rss_mb"]));
    if let Some(bytes) = res["index_sqlite_bytes"].as_u64().filter(|&b| b > 0) {
        line += &format!(", index.sqlite {:.1} MiB", bytes as f64 / (1 << 20) as f64);
    }
    println!("{line}");
}
