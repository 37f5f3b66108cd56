//! Parsing a path into a local path or an object in a store: the one place that knows the URL
//! schemes.

use std::{
    io,
    path::{Path, PathBuf},
};

use super::msc;

/// The object stores a remote path can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scheme {
    /// Amazon S3 or an S3-compatible server (`s3://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage (`az://`, `azure://`).
    Azure,
}

/// An object (or a prefix) in an object store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTarget {
    /// The URL as given, normalized (`s3://bucket/a/b`, `msc://profile/a/b`): what errors name.
    pub url: String,
    /// Which store.
    pub scheme: Scheme,
    /// Which client serves it: one per bucket (`s3://bucket`) or per MSC profile
    /// (`msc://profile`).
    pub store_id: String,
    /// The bucket (or Azure container).
    pub bucket: String,
    /// The object key inside the bucket, `/`-separated, without leading or trailing `/`.
    pub key: String,
    /// Client settings beyond the environment's, as object-store configuration keys (from an
    /// MSC profile).
    pub config: Vec<(String, String)>,
}

/// A path resolved to where its bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A file or folder on a local (or mounted) file system.
    Local(PathBuf),
    /// An object or prefix in an object store.
    Remote(RemoteTarget),
}

/// The URL scheme of `path` when it is written as a remote URL.
pub(super) fn remote_scheme(path: &Path) -> Option<&'static str> {
    let text = path.to_str()?;
    ["s3://", "gs://", "az://", "azure://", "msc://", "dss://"]
        .into_iter()
        .find(|s| text.starts_with(s))
}

/// The environment variable naming the folder (or object-store prefix) of `dss://` datasets.
const DSS_CACHE_DIR_VAR: &str = "NVDATASET_CACHE_DIR";

/// `dss://NAME@VERSION/PATH`: a dataset version in the dataset cache, the folder
/// `$NVDATASET_CACHE_DIR/NAME/VERSION/PATH` (which may itself be an object-store URL).
fn resolve_dss(head: &str, key: &str, url: &str) -> io::Result<Location> {
    dss_in(std::env::var_os(DSS_CACHE_DIR_VAR), head, key, url)
}

/// [`resolve_dss`] with the cache folder `cache`.
fn dss_in(
    cache: Option<std::ffi::OsString>,
    head: &str,
    key: &str,
    url: &str,
) -> io::Result<Location> {
    let bad =
        |reason: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {reason}"));
    let Some((name, version)) = head.rsplit_once('@') else {
        return Err(bad("a dss:// path names a dataset version as NAME@VERSION"));
    };
    if name.is_empty() || version.is_empty() {
        return Err(bad("a dss:// path names a dataset version as NAME@VERSION (both non-empty)"));
    }
    let Some(cache) = cache.filter(|v| !v.is_empty()) else {
        return Err(bad(&format!(
            "{DSS_CACHE_DIR_VAR} is not set (the folder of dss:// datasets)"
        )));
    };
    let rel = [name, version, key].into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>();
    let rel = rel.join("/");
    let cache = PathBuf::from(cache);
    match cache.to_str().filter(|_| remote_scheme(&cache).is_some()) {
        // Joined as text: `Path::join` would keep the URL's `//` but not its meaning.
        Some(url) => Location::of(Path::new(&format!("{}/{rel}", url.trim_end_matches('/')))),
        None => Ok(Location::Local(cache.join(rel))),
    }
}

/// The error for a remote path in a build without the `remote` feature.
#[cfg(not(feature = "remote"))]
pub(super) fn unsupported(url: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{url}: this build reads local paths only (built without the `remote` feature)"),
    )
}

impl Location {
    /// Resolves `path`: a URL of a known scheme is remote (an `msc://` profile of type `file` is
    /// local, and a `dss://` dataset version is wherever `$NVDATASET_CACHE_DIR` is), anything
    /// else is a local path.
    ///
    /// Errors: a URL without a bucket, an unknown or unreadable MSC profile.
    pub fn of(path: &Path) -> io::Result<Location> {
        let Some(scheme) = remote_scheme(path) else {
            return Ok(Location::Local(path.to_path_buf()));
        };
        let text = path.to_str().expect("remote_scheme checked UTF-8");
        let rest = &text[scheme.len()..];
        let (head, tail) = rest.split_once('/').unwrap_or((rest, ""));
        let bad =
            |reason: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{text}: {reason}"));
        if head.is_empty() {
            return Err(bad("no bucket (or profile) after the scheme"));
        }
        let key = normalize_key(tail).map_err(|e| bad(&e))?;
        let scheme = match scheme {
            "s3://" => Scheme::S3,
            "gs://" => Scheme::Gcs,
            "az://" | "azure://" => Scheme::Azure,
            "dss://" => return resolve_dss(head, &key, text),
            _ => return msc::resolve(head, &key, text),
        };
        let short = match scheme {
            Scheme::S3 => "s3",
            Scheme::Gcs => "gs",
            Scheme::Azure => "az",
        };
        Ok(Location::Remote(RemoteTarget {
            url: join_url(&format!("{short}://{head}"), &key),
            scheme,
            store_id: format!("{short}://{head}"),
            bucket: head.to_owned(),
            key,
            config: Vec::new(),
        }))
    }
}

/// `base` and `key` joined with one `/` (just `base` for an empty key).
pub(super) fn join_url(base: &str, key: &str) -> String {
    if key.is_empty() { base.to_owned() } else { format!("{base}/{key}") }
}

/// `a//b/./c/../d/` → `a/b/d`; a `..` above the bucket is an error.
pub(super) fn normalize_key(key: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in key.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err("`..` goes above the bucket".to_owned());
                }
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(path: &str) -> RemoteTarget {
        match Location::of(Path::new(path)).unwrap() {
            Location::Remote(t) => t,
            Location::Local(p) => panic!("{} is local", p.display()),
        }
    }

    #[test]
    fn parses_each_scheme() {
        let t = remote("s3://bucket/a/b.tar");
        assert_eq!(
            (t.scheme, t.bucket.as_str(), t.key.as_str()),
            (Scheme::S3, "bucket", "a/b.tar")
        );
        assert_eq!(t.store_id, "s3://bucket");
        assert_eq!(remote("gs://b/x").scheme, Scheme::Gcs);
        assert_eq!(remote("az://c/x").scheme, Scheme::Azure);
        assert_eq!(remote("azure://c/x").url, "az://c/x");
        assert_eq!(remote("s3://bucket").key, "");
        assert_eq!(
            Location::of(Path::new("/data/s3://x")).unwrap(),
            Location::Local(PathBuf::from("/data/s3://x"))
        );
    }

    #[test]
    fn dss_names_a_version_in_the_cache() {
        let dss = |cache: Option<&str>, head: &str, key: &str| {
            dss_in(cache.map(Into::into), head, key, &format!("dss://{head}/{key}"))
        };
        assert_eq!(
            dss(Some("/cache"), "charts@v0", "images/a.jpg").unwrap(),
            Location::Local(PathBuf::from("/cache/charts/v0/images/a.jpg"))
        );
        assert_eq!(
            dss(Some("/cache"), "a@b@v1", "").unwrap(),
            Location::Local(PathBuf::from("/cache/a@b/v1"))
        );
        let t = match dss(Some("s3://bucket/cache/"), "charts@v0", "x").unwrap() {
            Location::Remote(t) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!((t.bucket.as_str(), t.key.as_str()), ("bucket", "cache/charts/v0/x"));
        let err = dss(Some("/cache"), "charts", "").unwrap_err().to_string();
        assert!(err.contains("NAME@VERSION"), "{err}");
        let err = dss(None, "charts@v0", "").unwrap_err().to_string();
        assert!(err.contains("NVDATASET_CACHE_DIR is not set"), "{err}");
        assert!(remote_scheme(Path::new("dss://charts@v0")).is_some());
    }

    #[test]
    fn joined_paths_normalize() {
        // What `Path::join` and a metadataset's relative paths produce.
        let joined = Path::new("s3://bucket/meta/").join("../ds//shards/./a.tar");
        let t = remote(joined.to_str().unwrap());
        assert_eq!(t.key, "ds/shards/a.tar");
        assert_eq!(t.url, "s3://bucket/ds/shards/a.tar");
        let err = Location::of(Path::new("s3://bucket/../x")).unwrap_err();
        assert!(err.to_string().contains("above the bucket"), "{err}");
        let err = Location::of(Path::new("s3:///x")).unwrap_err();
        assert!(err.to_string().contains("no bucket"), "{err}");
    }
}
