//! Shared test helpers for energon-rs: synthetic WebDatasets, JSONL files and fixture paths.
//!
//! The generator plays the role of a data factory for tests and benchmarks: every byte it writes is a
//! pure function of its [`WdsSpec`], so tests can regenerate the same dataset anywhere.

use std::{
    fs,
    io::{self, Write},
    path::{Path, PathBuf},
};

use anyhow::Context;

pub mod s3;

pub use energon_fixtures::{fixtures_dir, ref_small_dir, ref_small_expected_dir};

/// Recursively copies a folder (files made writable, so tests may modify the copy).
pub fn copy_dir(src: &Path, dst: &Path) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let to = dst.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &to)?;
        } else {
            fs::copy(entry.path(), &to)?;
            let mut perms = fs::metadata(&to)?.permissions();
            #[allow(clippy::permissions_set_readonly_false)]
            perms.set_readonly(false);
            fs::set_permissions(&to, perms)?;
        }
    }
    Ok(())
}

/// Tar header flavour used for the generated shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TarFormat {
    /// POSIX ustar headers (long names are split into prefix and name).
    #[default]
    Ustar,
    /// GNU headers (long names use `L` records).
    Gnu,
    /// ustar headers with a PAX extended header before every member.
    Pax,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct WdsSpec {
    /// Number of tar shards.
    pub shards: usize,
    /// Samples per shard.
    pub per_shard: usize,
    /// Side length of the square JPEG images, in pixels.
    pub img: u32,
    /// Seed of the content generator.
    pub seed: u64,
    /// JPEG quality (1-100).
    pub quality: u8,
    /// Sub folder for the shards (empty for the output folder itself).
    pub subdir: String,
    /// Shard file name prefix.
    pub prefix: String,
    /// Tar header flavour.
    pub tar_format: TarFormat,
}

impl Default for WdsSpec {
    fn default() -> Self {
        WdsSpec {
            shards: 4,
            per_shard: 50,
            img: 32,
            seed: 0,
            quality: 85,
            subdir: "shards".to_owned(),
            prefix: "data-".to_owned(),
            tar_format: TarFormat::Ustar,
        }
    }
}

const WORDS: &[&str] = &[
    "a", "an", "the", "red", "green", "blue", "small", "large", "old", "new", "bright", "dark",
    "cat", "dog", "bird", "fish", "tree", "house", "car", "boat", "road", "river", "mountain",
    "city", "field", "sky", "cloud", "sun", "moon", "person", "child", "group", "table", "chair",
    "window", "door", "street", "beach", "forest", "garden", "sitting", "standing", "running",
    "flying", "near", "under", "over", "with", "without", "in", "on", "at", "of", "and", "next",
    "to", "behind", "front",
];

/// A small deterministic generator (SplitMix64); test data only, never data order.
#[derive(Debug, Clone)]
struct Gen(u64);

impl Gen {
    fn new(seed: u64, stream: u64) -> Self {
        let mut g = Gen(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        g.next();
        g
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One generated sample.
#[derive(Debug, Clone)]
pub struct GenSample {
    /// Sample key, `format!("{global_index:08}")`.
    pub key: String,
    /// JPEG bytes.
    pub jpg: Vec<u8>,
    /// Caption text.
    pub txt: String,
    /// Metadata JSON (compact, sorted keys).
    pub json: String,
}

fn make_image(g: &mut Gen, size: u32) -> Vec<u8> {
    let grid: Vec<u8> = (0..48).map(|_| g.below(256) as u8).collect();
    let amp = g.below(41) as i32;
    let mut res = Vec::with_capacity((size * size * 3) as usize);
    let scale = 3.0 / (size.max(2) - 1) as f64;
    for y in 0..size {
        for x in 0..size {
            let fy = y as f64 * scale;
            let fx = x as f64 * scale;
            let (y0, x0) = (fy.floor().min(2.0) as usize, fx.floor().min(2.0) as usize);
            let (dy, dx) = (fy - y0 as f64, fx - x0 as f64);
            for c in 0..3 {
                let at = |yy: usize, xx: usize| f64::from(grid[(yy * 4 + xx) * 3 + c]);
                let v = at(y0, x0) * (1.0 - dy) * (1.0 - dx)
                    + at(y0, x0 + 1) * (1.0 - dy) * dx
                    + at(y0 + 1, x0) * dy * (1.0 - dx)
                    + at(y0 + 1, x0 + 1) * dy * dx;
                let noise = if amp > 0 { g.below(2 * amp as u64 + 1) as i32 - amp } else { 0 };
                res.push((v as i32 + noise).clamp(0, 255) as u8);
            }
        }
    }
    res
}

fn make_caption(g: &mut Gen) -> String {
    let mut n = 4 + g.below(9);
    if g.unit() < 0.1 {
        n = 60 + g.below(60);
    }
    (0..n).map(|_| WORDS[g.below(WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
}

/// Generates the samples of shard `shard` (each shard has its own stream, so shard `s` is the same
/// whatever the number of shards).
pub fn gen_shard(spec: &WdsSpec, shard: usize) -> anyhow::Result<Vec<GenSample>> {
    let mut g = Gen::new(spec.seed, shard as u64);
    let mut res = Vec::with_capacity(spec.per_shard);
    for local in 0..spec.per_shard {
        let global = shard * spec.per_shard + local;
        let pixels = make_image(&mut g, spec.img);
        let mut jpg = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpg, spec.quality)
            .encode(&pixels, spec.img, spec.img, image::ExtendedColorType::Rgb8)
            .context("encoding a synthetic JPEG")?;
        let txt = make_caption(&mut g);
        let key = format!("{global:08}");
        let meta = serde_json::json!({
            "caption_words": txt.split(' ').count(),
            "height": spec.img,
            "index": local,
            "key": key,
            "label": g.below(1000),
            "score": (g.unit() * 1e6).round() / 1e6,
            "shard": shard,
            "width": spec.img,
        });
        res.push(GenSample { key, jpg, txt, json: meta.to_string() });
    }
    Ok(res)
}

fn append(
    builder: &mut tar::Builder<impl Write>,
    format: TarFormat,
    name: &str,
    data: &[u8],
) -> io::Result<()> {
    let mut header = match format {
        TarFormat::Gnu => tar::Header::new_gnu(),
        TarFormat::Ustar | TarFormat::Pax => tar::Header::new_ustar(),
    };
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    if format == TarFormat::Pax {
        let size = data.len().to_string();
        builder.append_pax_extensions([("path", name.as_bytes()), ("size", size.as_bytes())])?;
    }
    builder.append_data(&mut header, name, data)
}

/// Writes a tar shard with the given members (name, content), atomically.
pub fn write_tar(path: &Path, format: TarFormat, members: &[(String, Vec<u8>)]) -> io::Result<()> {
    let tmp = path.with_extension("tar.tmp");
    {
        let file = io::BufWriter::new(fs::File::create(&tmp)?);
        let mut builder = tar::Builder::new(file);
        for (name, data) in members {
            append(&mut builder, format, name, data)?;
        }
        builder.into_inner()?.flush()?;
    }
    fs::rename(&tmp, path)
}

/// Writes a synthetic WebDataset (`<out>/<subdir>/<prefix>NNNNNN.tar`, members `KEY.jpg`, `KEY.txt`,
/// `KEY.json` per sample) and returns the shard paths.
pub fn write_wds(out_dir: &Path, spec: &WdsSpec) -> anyhow::Result<Vec<PathBuf>> {
    let shard_dir =
        if spec.subdir.is_empty() { out_dir.to_owned() } else { out_dir.join(&spec.subdir) };
    fs::create_dir_all(&shard_dir).with_context(|| format!("creating {}", shard_dir.display()))?;
    let mut res = Vec::with_capacity(spec.shards);
    for shard in 0..spec.shards {
        let path = shard_dir.join(format!("{}{shard:06}.tar", spec.prefix));
        let mut members = Vec::with_capacity(3 * spec.per_shard);
        for s in gen_shard(spec, shard)? {
            members.push((format!("{}.jpg", s.key), s.jpg));
            members.push((format!("{}.txt", s.key), s.txt.into_bytes()));
            members.push((format!("{}.json", s.key), s.json.into_bytes()));
        }
        write_tar(&path, spec.tar_format, &members)
            .with_context(|| format!("writing {}", path.display()))?;
        res.push(path);
    }
    Ok(res)
}

/// Writes `<out>/data.jsonl`: one JSON object per sample (metadata plus `caption`, no image).
pub fn write_jsonl(out_dir: &Path, spec: &WdsSpec) -> anyhow::Result<PathBuf> {
    fs::create_dir_all(out_dir)?;
    let path = out_dir.join("data.jsonl");
    let mut out = io::BufWriter::new(fs::File::create(&path)?);
    for shard in 0..spec.shards {
        for s in gen_shard(spec, shard)? {
            let mut rec: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(&s.json)?;
            rec.insert("caption".to_owned(), s.txt.into());
            rec.sort_keys();
            writeln!(out, "{}", serde_json::Value::Object(rec))?;
        }
    }
    out.flush()?;
    Ok(path)
}
