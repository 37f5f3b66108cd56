//! Test helpers shared by the modules' tests: small tar shards written with the `tar` crate.

use std::{fs, path::Path};

/// Writes shard `parts/data-<i>.tar` under `root` with one `txt` member (`text of KEY`) per key.
pub(crate) fn write_text_shard<K: AsRef<str>>(root: &Path, i: usize, keys: &[K]) {
    fs::create_dir_all(root.join("parts")).unwrap();
    let file = fs::File::create(root.join(format!("parts/data-{i}.tar"))).unwrap();
    let mut builder = tar::Builder::new(file);
    for key in keys {
        let key = key.as_ref();
        let data = format!("text of {key}");
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, format!("{key}.txt"), data.as_bytes()).unwrap();
    }
    builder.finish().unwrap();
}
