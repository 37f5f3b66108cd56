//! `bench-remote`: whole-loader throughput (samples/s) and peak memory of a dataset read from a
//! local S3-compatible server (moto) against the same dataset on local disk, with a per-request
//! latency added by a proxy, for several numbers of requests in flight.
//!
//! Each configuration runs in a child process of its own (the storage options are fixed at a
//! process's first request, and peak memory is then per configuration). Besides the loader, a
//! "raw" run fetches every shard by 1 MiB ranged reads with the same number of requests in flight
//! and no loader at all: what the server (and the client) can deliver, the ceiling of a loader.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, atomic::Ordering},
    time::Instant,
};

use clap::Parser;
use energon_cook::LoaderBuilder;
use energon_dist::WorkerConfig;
use energon_index::storage::RemoteObject;
use energon_index::{
    INFO_JSON, NV_META,
    prepare::{PrepareOptions, prepare_dataset},
};
use energon_reader::Dataset;
use energon_tests::{
    WdsSpec,
    s3::{Proxy, S3Server},
};
use serde_json::Value;

/// Load a generated, prepared dataset (JPEG + txt + json per sample) from local disk and from a
/// local S3 server behind a latency-adding proxy; report samples/s and peak memory.
#[derive(Debug, Parser)]
struct Args {
    /// Where the dataset is generated and prepared (reused when it already matches).
    #[arg(long, default_value = "/tmp/energon-bench-remote")]
    dir: PathBuf,
    /// Samples in the dataset.
    #[arg(long, default_value_t = 20_000)]
    dataset_samples: usize,
    /// Number of shards.
    #[arg(long, default_value_t = 40)]
    shards: usize,
    /// Side of the generated JPEG images (96 gives samples of about 10 KB).
    #[arg(long, default_value_t = 96)]
    img: u32,
    /// Samples loaded per configuration.
    #[arg(long, default_value_t = 20_000)]
    samples: u64,
    /// Batch size.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Loader worker threads.
    #[arg(long, default_value_t = 2)]
    num_workers: usize,
    /// Added latency per request, in milliseconds (each server is also measured without).
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// Requests in flight per loader thread to measure (`ENERGON_STORAGE_IN_FLIGHT`).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    in_flight: Vec<usize>,
    /// Print one JSON line per configuration.
    #[arg(long)]
    json: bool,
    /// Skip the raw runs (ranged reads without a loader).
    #[arg(long)]
    no_raw: bool,
    /// Run one configuration on this path and print its result as JSON (used by the parent).
    #[arg(long, hide = true)]
    child: Option<PathBuf>,
    /// With --child: fetch the shards by ranged reads instead of loading samples.
    #[arg(long, hide = true)]
    raw: bool,
}

#[allow(clippy::print_stdout)]
fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(path) = &args.child {
        let reset = energon_bench::reset_peak_rss();
        let (rate, first_s) = if args.raw { raw(path)? } else { load(&args, path)? };
        let peak = if reset { energon_bench::peak_rss_mb() } else { None };
        println!(
            "{}",
            serde_json::json!({"samples_per_s": rate, "first_batch_s": first_s, "peak_rss_mb": peak})
        );
        return Ok(());
    }
    let spec = WdsSpec {
        shards: args.shards,
        per_shard: args.dataset_samples / args.shards,
        img: args.img,
        ..WdsSpec::default()
    };
    energon_bench::ensure_dataset(&args.dir, &spec)?;
    if !args.dir.join(NV_META).join(INFO_JSON).is_file() {
        prepare_dataset(&args.dir, &PrepareOptions::default(), &|_| {})?;
    }
    let bytes = shard_bytes(&args.dir.join(&spec.subdir))?;
    println!(
        "dataset: {} samples in {} shards, {:.1} KB per sample; {} loader workers",
        spec.per_shard * spec.shards,
        spec.shards,
        bytes as f64 / (spec.per_shard * spec.shards) as f64 / 1000.0,
        args.num_workers
    );
    let server = S3Server::start();
    server.create_bucket("bench");
    server.upload_dir(&args.dir, "bench", "ds");
    // Moto answers every request itself (it is slower than a local disk here: the raw runs show
    // how much); the "ranges from memory" proxies fetch each object from it once (before the
    // measured runs) and answer the ranged GETs themselves, as a fast store would, so that the
    // loader's own overheads show.
    let proxy = |latency_ms: u64, serve_ranges: bool| {
        let proxy = Proxy::start(server.port());
        proxy.control.latency_us.store(latency_ms * 1000, Ordering::SeqCst);
        proxy.control.serve_ranges.store(serve_ranges, Ordering::SeqCst);
        proxy
    };
    let proxies = [
        ("moto", 0, proxy(0, false)),
        ("moto", args.latency_ms, proxy(args.latency_ms, false)),
        ("ranges from memory", 0, proxy(0, true)),
        ("ranges from memory", args.latency_ms, proxy(args.latency_ms, true)),
    ];
    let cache = tempfile::tempdir()?;
    let url = PathBuf::from("s3://bench/ds");
    // A proxy serving ranges from memory fetches each object from moto on its first request;
    // one pass over every shard first, so that measured runs see only the fast store.
    for (_, _, proxy) in proxies.iter().filter(|p| p.0 != "moto") {
        child(&args, &url, Some(&proxy.endpoint()), 16, true, cache.path())?;
    }

    // (name, path, proxy, requests in flight, raw)
    let mut configs = vec![("local disk".to_owned(), args.dir.clone(), None, 8, false)];
    for (server_name, latency, proxy) in &proxies {
        for raw in [false, true] {
            if raw && args.no_raw {
                continue;
            }
            for &n in &args.in_flight {
                let what = if raw { "raw GETs" } else { "loader" };
                let name = format!("{what}, {server_name} + {latency} ms");
                configs.push((name, url.clone(), Some(proxy), n, raw));
            }
        }
    }
    let mut local_rate = None;
    for (name, path, proxy, in_flight, raw) in configs {
        let before = proxy.map_or(0, |p| p.control.requests.load(Ordering::SeqCst));
        let endpoint = proxy.map(Proxy::endpoint);
        let result = child(&args, &path, endpoint.as_deref(), in_flight, raw, cache.path())?;
        let rate = result["samples_per_s"].as_f64().unwrap_or(0.0);
        let peak = result["peak_rss_mb"].as_f64();
        let requests = proxy.map_or(0, |p| p.control.requests.load(Ordering::SeqCst)) - before;
        let local = *local_rate.get_or_insert(rate);
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "config": name, "in_flight": in_flight, "raw": raw,
                    "num_workers": args.num_workers, "samples": args.samples,
                    "samples_per_s": rate, "of_local": rate / local,
                    "first_batch_s": result["first_batch_s"], "peak_rss_mb": peak,
                    "requests": requests,
                })
            );
        } else {
            println!(
                "{name:>34}, {in_flight:>2} in flight: {rate:>8.0} samples/s ({:>3.0}% of local), {requests:>5} requests, first batch {:.3} s, peak RSS {}",
                100.0 * rate / local,
                result["first_batch_s"].as_f64().unwrap_or(0.0),
                peak.map_or("n/a".to_owned(), |p| format!("{p:.1} MiB"))
            );
        }
    }
    Ok(())
}

/// The total size of the shards in `dir`.
fn shard_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        total += entry?.metadata()?.len();
    }
    Ok(total)
}

/// Runs one configuration in a child process; returns its JSON result.
fn child(
    args: &Args,
    path: &Path,
    endpoint: Option<&str>,
    in_flight: usize,
    raw: bool,
    cache: &Path,
) -> anyhow::Result<Value> {
    let mut cmd = Command::new(std::env::current_exe()?);
    if raw {
        cmd.arg("--raw");
    }
    cmd.arg("--child")
        .arg(path)
        .args(["--samples", &args.samples.to_string()])
        .args(["--batch-size", &args.batch_size.to_string()])
        .args(["--num-workers", &args.num_workers.to_string()])
        .env("ENERGON_STORAGE_IN_FLIGHT", in_flight.to_string())
        .env("ENERGON_STORAGE_CACHE_DIR", cache);
    if let Some(endpoint) = endpoint {
        for (k, v) in S3Server::client_env(endpoint) {
            cmd.env(k, v);
        }
    }
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "configuration {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// Loads `args.samples` raw samples from `path`; returns the steady samples/s and the seconds to
/// the first batch.
fn load(args: &Args, path: &Path) -> anyhow::Result<(f64, f64)> {
    let dataset =
        Arc::new(Dataset::open(path, &energon_bench::open_options(path, args.num_workers)?)?);
    let builder = LoaderBuilder::new(dataset, WorkerConfig::new(0, 1, args.num_workers)?, |raw| {
        Ok(Some(energon_bench::touch_pages(&raw)))
    });
    energon_bench::steady_rate(builder, args.batch_size, 0, args.samples)
}

/// Fetches every shard of the prepared dataset at `path` by ranged reads of
/// `ENERGON_STORAGE_WINDOW_BYTES` (1 MiB), `ENERGON_STORAGE_IN_FLIGHT` of them in flight, on this
/// thread; returns the samples/s this delivers (samples of the shards read over the time) and 0.
fn raw(path: &Path) -> anyhow::Result<(f64, f64)> {
    let info = energon_index::info::read_dataset_info(path)?;
    let window = energon_index::storage::options().window_bytes.max(1);
    let mut objects = Vec::new();
    let mut samples = 0u64;
    for (name, count) in &info.shard_counts {
        let shard = path.join(name);
        let size = energon_index::storage::size(&shard)?;
        objects.push((RemoteObject::open_sized(&shard, size)?, size));
        samples += count;
    }
    let windows: Vec<(&RemoteObject, std::ops::Range<u64>)> = objects
        .iter()
        .flat_map(|(object, size)| {
            (0..size.div_ceil(window))
                .map(move |w| (&**object, w * window..((w + 1) * window).min(*size)))
        })
        .collect();
    let ahead = energon_index::storage::options().in_flight.max(1);
    let start = Instant::now();
    let mut total = 0u64;
    // Windows are started `ahead` before they are read (the thread's bound keeps that many
    // requests in flight).
    for (i, (object, w)) in windows.iter().enumerate() {
        for (o, w) in windows.iter().skip(i).take(ahead) {
            o.prefetch(w.clone())?;
        }
        total += object.read_in(w.clone(), w.clone()).map(|b| b.len() as u64)?;
        object.release(w.start);
    }
    anyhow::ensure!(total == objects.iter().map(|o| o.1).sum::<u64>(), "short reads");
    Ok((samples as f64 / start.elapsed().as_secs_f64().max(1e-9), 0.0))
}
