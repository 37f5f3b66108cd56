//! `msc://PROFILE/PATH`: a profile of the multi-storage client's configuration file, resolved to
//! the object store (or local folder) and base path it names.

use std::{
    io,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
    time::SystemTime,
};

use serde_json::{Value, json};

use super::location::{Location, RemoteTarget, Scheme, join_url, normalize_key};

/// The configuration files the multi-storage client reads, in its order of preference.
fn config_candidates() -> Vec<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(path) = env("MSC_CONFIG") {
        files.push(path);
    }
    if let Some(xdg) = env("XDG_CONFIG_HOME") {
        dirs.push(xdg.join("msc/config"));
    }
    if let Some(home) = env("HOME") {
        dirs.push(home.join(".msc_config"));
        dirs.push(home.join(".config/msc/config"));
    }
    let xdg_dirs = std::env::var("XDG_CONFIG_DIRS").unwrap_or_else(|_| "/etc/xdg".to_owned());
    for dir in xdg_dirs.split(':').filter(|d| !d.is_empty()) {
        dirs.push(Path::new(dir).join("msc/config"));
    }
    dirs.push(PathBuf::from("/etc/msc_config"));
    for stem in dirs {
        for ext in ["yaml", "json"] {
            let mut name = stem.clone().into_os_string();
            name.push(format!(".{ext}"));
            files.push(PathBuf::from(name));
        }
    }
    files
}

fn bad(url: &str, reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {reason}"))
}

/// What a loaded configuration was read from: each file it may come from (the candidates, then
/// rclone's file) with its modification time and size, `None` where it does not exist.
type Stamps = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

fn stamps() -> Stamps {
    let mut files = config_candidates();
    files.extend(super::rclone::find());
    files
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).ok().filter(std::fs::Metadata::is_file);
            let stamp = meta.and_then(|m| Some((m.modified().ok()?, m.len())));
            (path, stamp)
        })
        .collect()
}

/// The configuration last loaded, kept while the files it may come from stay as they were: every
/// object opened under an `msc://` path resolves its profile, and checking the files costs less
/// than reading and parsing them again.
static LOADED: Mutex<Option<(Stamps, (PathBuf, Value))>> = Mutex::new(None);

/// `load()`, or what it gave before when `stamps` are those it was loaded with (errors are not
/// kept).
fn cached(
    stamps: Stamps,
    load: impl FnOnce() -> io::Result<(PathBuf, Value)>,
) -> io::Result<(PathBuf, Value)> {
    let mut loaded = LOADED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((kept, config)) = loaded.as_ref()
        && *kept == stamps
    {
        return Ok(config.clone());
    }
    let config = load()?;
    *loaded = Some((stamps, config.clone()));
    Ok(config)
}

/// The configuration (see [`read_config`]), read again only when its files changed.
fn load_config(url: &str) -> io::Result<(PathBuf, Value)> {
    cached(stamps(), || read_config(url))
}

/// Reads the first configuration file that exists (`MSC_CONFIG` must exist when set), with the
/// remotes of rclone's configuration file added as profiles (the configuration's own profiles
/// win). The path returned names the file errors refer to.
fn read_config(url: &str) -> io::Result<(PathBuf, Value)> {
    let mut found = msc_config(url)?;
    if let Some(rclone) = super::rclone::find() {
        let (_, config) = found.get_or_insert_with(|| (rclone.clone(), json!({"profiles": {}})));
        if config.get("profiles").is_none_or(Value::is_null) {
            config["profiles"] = json!({});
        }
        if let Some(profiles) = config.get_mut("profiles").and_then(Value::as_object_mut) {
            for (name, profile) in super::rclone::read(&rclone) {
                profiles.entry(name).or_insert(profile);
            }
        }
    }
    found.ok_or_else(|| {
        bad(
            url,
            "no multi-storage-client configuration found (set MSC_CONFIG, write \
             ~/.msc_config.yaml, or configure the remote in rclone.conf)"
                .to_owned(),
        )
    })
}

/// The first multi-storage-client configuration file that exists, read.
fn msc_config(url: &str) -> io::Result<Option<(PathBuf, Value)>> {
    let candidates = config_candidates();
    let explicit = std::env::var_os("MSC_CONFIG").is_some_and(|v| !v.is_empty());
    for (i, path) in candidates.iter().enumerate() {
        if !path.is_file() {
            if i == 0 && explicit {
                return Err(bad(
                    url,
                    format!("MSC_CONFIG names {}, which does not exist", path.display()),
                ));
            }
            continue;
        }
        let value = crate::yaml::load_yaml_or_json(path)
            .or_else(|_| crate::yaml::load_yaml(path))
            .map_err(|e| bad(url, e.to_string()))?;
        return Ok(Some((path.clone(), value)));
    }
    Ok(None)
}

/// A scalar option as text, with `${VAR}` taken from the environment.
fn text(value: &Value) -> Option<String> {
    let raw = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    Some(expand_env(&raw))
}

fn expand_env(raw: &str) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else { break };
        out.push_str(&rest[..start]);
        out.push_str(&std::env::var(&rest[start + 2..start + len]).unwrap_or_default());
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// Resolves profile `profile` and the normalized `key` below its base path.
pub(super) fn resolve(profile: &str, key: &str, url: &str) -> io::Result<Location> {
    let default_local = || {
        Location::Local(
            key.split('/').filter(|p| !p.is_empty()).fold(PathBuf::from("/"), |p, c| p.join(c)),
        )
    };
    let (config_path, config) = match load_config(url) {
        Ok(found) => found,
        // Without a configuration, the implicit `default` profile is the local file system.
        Err(_) if profile == "default" && std::env::var_os("MSC_CONFIG").is_none() => {
            return Ok(default_local());
        }
        Err(e) => return Err(e),
    };
    if profile == "default" && config.get("profiles").and_then(|p| p.get(profile)).is_none() {
        return Ok(default_local());
    }
    resolve_in(&config_path, &config, profile, key, url)
}

/// Resolves profile `profile` of the configuration `config` (read from `config_path`).
fn resolve_in(
    config_path: &Path,
    config: &Value,
    profile: &str,
    key: &str,
    url: &str,
) -> io::Result<Location> {
    let in_config = |reason: String| bad(url, format!("{}: {reason}", config_path.display()));
    let profile_value = config
        .get("profiles")
        .and_then(|p| p.get(profile))
        .ok_or_else(|| in_config(format!("no profile {profile:?}")))?;
    let provider = profile_value
        .get("storage_provider")
        .ok_or_else(|| in_config(format!("profile {profile:?} has no storage_provider")))?;
    let kind = provider.get("type").and_then(text).unwrap_or_default();
    let options = provider.get("options").cloned().unwrap_or(Value::Null);
    let option = |name: &str| options.get(name).and_then(text);
    let base_path = option("base_path").unwrap_or_default();
    if kind == "file" {
        let base = PathBuf::from(if base_path.is_empty() { "/".to_owned() } else { base_path });
        return Ok(Location::Local(
            key.split('/').filter(|p| !p.is_empty()).fold(base, |p, c| p.join(c)),
        ));
    }
    let scheme = match kind.as_str() {
        "s3" | "s8k" => Scheme::S3,
        "gcs" => Scheme::Gcs,
        "azure" => Scheme::Azure,
        other => {
            return Err(in_config(format!(
                "profile {profile:?}: storage provider type {other:?} is not supported (s3, s8k, \
                 gcs, azure, file)"
            )));
        }
    };
    // The bucket is the first name of `base_path/key` (an rclone remote has no base path:
    // its URLs start with the bucket).
    let full = normalize_key(&format!("{base_path}/{key}"))
        .map_err(|e| in_config(format!("base_path: {e}")))?;
    let (bucket, full_key) = full.split_once('/').unwrap_or((full.as_str(), ""));
    if bucket.is_empty() {
        return Err(in_config(format!("profile {profile:?}: names no bucket")));
    }
    let full_key = full_key.to_owned();
    let mut cfg: Vec<(String, String)> = Vec::new();
    let creds = profile_value
        .get("credentials_provider")
        .and_then(|c| c.get("options"))
        .cloned()
        .unwrap_or(Value::Null);
    let cred = |name: &str| creds.get(name).and_then(text);
    match scheme {
        Scheme::S3 => {
            for (opt, key) in [("endpoint_url", "aws_endpoint"), ("region_name", "aws_region")] {
                if let Some(v) = option(opt) {
                    cfg.push((key.to_owned(), v));
                }
            }
            for (opt, key) in [
                ("access_key", "aws_access_key_id"),
                ("secret_key", "aws_secret_access_key"),
                ("session_token", "aws_session_token"),
            ] {
                if let Some(v) = cred(opt) {
                    cfg.push((key.to_owned(), v));
                }
            }
        }
        Scheme::Azure => {
            if let Some(endpoint) = option("endpoint_url") {
                cfg.push(("azure_storage_endpoint".to_owned(), endpoint.clone()));
                if let Some(account) = account_of(&endpoint) {
                    cfg.push(("azure_storage_account_name".to_owned(), account));
                }
            }
            if let Some(conn) = cred("connection") {
                for part in conn.split(';') {
                    if let Some(key) = part.strip_prefix("AccountKey=") {
                        cfg.push(("azure_storage_account_key".to_owned(), key.to_owned()));
                    } else if let Some(name) = part.strip_prefix("AccountName=") {
                        cfg.push(("azure_storage_account_name".to_owned(), name.to_owned()));
                    }
                }
            }
        }
        Scheme::Gcs => {}
    }
    Ok(Location::Remote(RemoteTarget {
        url: join_url(&format!("msc://{profile}"), key),
        scheme,
        store_id: format!("msc://{profile}"),
        bucket: bucket.to_owned(),
        key: full_key,
        config: cfg,
    }))
}

/// `https://ACCOUNT.blob.core.windows.net` → `ACCOUNT`.
fn account_of(endpoint: &str) -> Option<String> {
    let host = endpoint.split("://").nth(1)?.split('/').next()?;
    host.strip_suffix(".blob.core.windows.net").map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_environment_variables() {
        // HOME is set in any test environment.
        let home = std::env::var("HOME").unwrap();
        assert_eq!(expand_env("a${HOME}b"), format!("a{home}b"));
        assert_eq!(expand_env("${NO_SUCH_VARIABLE_X}"), "");
        assert_eq!(expand_env("x${unclosed"), "x${unclosed");
        assert_eq!(account_of("https://acct.blob.core.windows.net/").as_deref(), Some("acct"));
    }

    #[test]
    fn the_configuration_is_read_again_only_when_its_files_change() {
        let at = |secs| Some((SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs), 10));
        let stamps = |secs| vec![(PathBuf::from("/cfg.yaml"), at(secs))];
        let config = |n: u64| Ok((PathBuf::from("/cfg.yaml"), json!({"n": n})));
        let fail = || Err(io::Error::other("read again"));
        assert_eq!(cached(stamps(1), || config(1)).unwrap().1["n"], 1);
        assert_eq!(cached(stamps(1), fail).unwrap().1["n"], 1);
        // Changed (or removed) files are read again; a failed read is not kept.
        assert!(cached(stamps(2), fail).is_err());
        assert_eq!(cached(stamps(2), || config(2)).unwrap().1["n"], 2);
        assert_eq!(
            cached(vec![(PathBuf::from("/cfg.yaml"), None)], || config(3)).unwrap().1["n"],
            3
        );
    }

    #[test]
    fn an_rclone_remote_names_the_bucket_in_its_urls() {
        let conf = "[emu]\ntype = s3\naccess_key_id = k\nsecret_access_key = s\n\
                    endpoint = http://127.0.0.1:9\n";
        let config = json!({"profiles": super::super::rclone::profiles(conf)});
        let url = "msc://emu/bucket/ds/a.tar";
        let Location::Remote(t) =
            resolve_in(Path::new("rclone.conf"), &config, "emu", "bucket/ds/a.tar", url).unwrap()
        else {
            panic!("local")
        };
        assert_eq!((t.bucket.as_str(), t.key.as_str()), ("bucket", "ds/a.tar"));
        assert!(t.config.contains(&("aws_endpoint".to_owned(), "http://127.0.0.1:9".to_owned())));
        assert!(t.config.contains(&("aws_access_key_id".to_owned(), "k".to_owned())));
        let err =
            resolve_in(Path::new("rclone.conf"), &config, "emu", "", "msc://emu").unwrap_err();
        assert!(err.to_string().contains("names no bucket"), "{err}");
    }
}
