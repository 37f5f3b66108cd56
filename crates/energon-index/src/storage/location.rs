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
    ["s3://", "gs://", "az://", "azure://", "msc://"].into_iter().find(|s| text.starts_with(s))
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
    /// local), anything else is a local path.
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
