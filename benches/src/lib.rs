//! Whole-pipeline benchmarks for energon-rs, and the measuring helpers they share.

use std::{fs, path::Path};

use energon_tests::WdsSpec;

/// Peak resident set size of this process in MiB (`VmHWM`), if the platform reports it.
pub fn peak_rss_mb() -> Option<f64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
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
