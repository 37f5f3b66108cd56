//! rclone's configuration file (`rclone.conf`) as profiles of the multi-storage client, which
//! reads it beside its own configuration: each remote `[NAME]` is the profile `msc://NAME`.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

/// Where the multi-storage client looks for `rclone.conf`, in its order: beside the `rclone`
/// program on `PATH`, `$XDG_CONFIG_HOME/rclone/`, `/etc/rclone.conf`,
/// `~/.config/rclone/rclone.conf`, `~/.rclone.conf`.
pub(super) fn find() -> Option<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut candidates = Vec::new();
    if let Some(path) = env("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("rclone").is_file() {
                candidates.push(dir.join("rclone.conf"));
                break;
            }
        }
    }
    if let Some(xdg) = env("XDG_CONFIG_HOME").filter(|d| d.is_dir()) {
        candidates.push(xdg.join("rclone/rclone.conf"));
    }
    candidates.push(PathBuf::from("/etc/rclone.conf"));
    let home = env("HOME").unwrap_or_default();
    candidates.push(home.join(".config/rclone/rclone.conf"));
    candidates.push(home.join(".rclone.conf"));
    candidates.into_iter().find(|p| p.is_file())
}

/// The remotes of an `rclone.conf` text as the multi-storage client's `profiles` mapping
/// (remotes of types it does not read are left out).
pub(super) fn profiles(text: &str) -> Map<String, Value> {
    let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push((name.trim().to_owned(), Vec::new()));
        } else if let (Some((key, value)), Some((_, entries))) =
            (line.split_once('=').or_else(|| line.split_once(':')), sections.last_mut())
        {
            entries.push((key.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    sections.into_iter().filter_map(|(name, entries)| Some((name, profile(&entries)?))).collect()
}

/// One remote as a profile: `storage_provider` (type, options) and `credentials_provider`.
fn profile(entries: &[(String, String)]) -> Option<Value> {
    let get = |key: &str| entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let pick = |pairs: &[(&str, &str)]| -> Map<String, Value> {
        pairs
            .iter()
            .filter_map(|(to, from)| Some(((*to).to_owned(), Value::from(get(from)?))))
            .collect()
    };
    let kind = get("type").unwrap_or_default().to_ascii_lowercase();
    let (kind, mut options, credentials) = match kind.as_str() {
        "s3" | "s8k" | "gcs_s3" => (
            "s3",
            pick(&[
                ("region_name", "region"),
                ("endpoint_url", "endpoint"),
                ("base_path", "base_path"),
            ]),
            pick(&[
                ("access_key", "access_key_id"),
                ("secret_key", "secret_access_key"),
                ("session_token", "session_token"),
            ]),
        ),
        "azure" | "azureblob" => (
            "azure",
            pick(&[("endpoint_url", "endpoint"), ("base_path", "base_path")]),
            pick(&[("connection", "connection")]),
        ),
        "gcs" | "google cloud storage" => {
            ("gcs", pick(&[("endpoint_url", "endpoint"), ("base_path", "base_path")]), Map::new())
        }
        "file" => (
            "file",
            entries.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect(),
            Map::new(),
        ),
        _ => return None,
    };
    options.entry("base_path").or_insert_with(|| Value::from(""));
    let mut res = json!({"storage_provider": {"type": kind, "options": options}});
    if !credentials.is_empty() {
        res["credentials_provider"] = json!({"options": credentials});
    }
    Some(res)
}

/// The profiles of the `rclone.conf` at `path` (none when it cannot be read).
pub(super) fn read(path: &Path) -> Map<String, Value> {
    std::fs::read_to_string(path).map(|text| profiles(&text)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_become_profiles() {
        let text = "# comment\n[emu]\ntype = s3\nenv_auth = false\naccess_key_id = test\n\
                    secret_access_key = secret\nregion = us-east-1\nendpoint = http://127.0.0.1:9\n\
                    \n[box]\ntype = dropbox\n\n[az]\ntype = azureblob\nconnection = AccountName=a\n";
        let profiles = profiles(text);
        assert_eq!(profiles.keys().collect::<Vec<_>>(), ["emu", "az"]);
        assert_eq!(
            profiles["emu"],
            json!({
                "storage_provider": {"type": "s3", "options": {
                    "region_name": "us-east-1", "endpoint_url": "http://127.0.0.1:9",
                    "base_path": ""}},
                "credentials_provider": {"options": {"access_key": "test", "secret_key": "secret"}}
            })
        );
        assert_eq!(profiles["az"]["storage_provider"]["type"], "azure");
    }
}
