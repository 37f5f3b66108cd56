//! What identifies one version of a remote object, and the version a reader of it holds to.
//!
//! A local shard is cross-checked with its index by the reader (its size, the keys of its first
//! and last samples against `index.sqlite`); a remote shard's reader does not fetch
//! `index.sqlite`, so it checks the object's version instead. Every ranged answer of an object
//! store carries the object's size and entity tag (ETag); a reader holds every answer for an
//! object to one version: the one recorded when the dataset was prepared (see
//! [`crate::object_versions`]), else the first one it saw. An answer of another version is an
//! error, never bytes of a different object.

use std::sync::{
    OnceLock,
    atomic::{AtomicBool, Ordering},
};

use serde::{Deserialize, Serialize};

/// One version of an object, as its store describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectVersion {
    /// Size in bytes.
    pub size: u64,
    /// The entity tag, as the store gives it (quotes included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_tag: Option<String>,
    /// The last modification time (RFC 3339), compared only where the store gives no entity tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

impl ObjectVersion {
    /// Whether `other` is the same version: the same size, and the same entity tag (the same
    /// modification time where either side has no tag).
    pub fn same(&self, other: &ObjectVersion) -> bool {
        self.size == other.size
            && match (&self.e_tag, &other.e_tag) {
                (Some(a), Some(b)) => a == b,
                _ => self.last_modified == other.last_modified,
            }
    }

    fn describe(&self) -> String {
        match (&self.e_tag, &self.last_modified) {
            (Some(tag), _) => format!("{} bytes with ETag {tag}", self.size),
            (None, Some(time)) => format!("{} bytes modified {time}", self.size),
            (None, None) => format!("{} bytes", self.size),
        }
    }
}

/// The version every read of one object must see (shared by each open of the object, so that a
/// reader that closes and opens it again still holds to the same version).
#[derive(Debug, Default)]
pub struct VersionPin {
    version: OnceLock<ObjectVersion>,
    /// Whether the version was recorded by the prepare (else it is the first one a read saw).
    recorded: bool,
    changed: AtomicBool,
}

impl VersionPin {
    /// A pin to the first version a read sees.
    pub fn new() -> Self {
        Self::default()
    }

    /// A pin to the version recorded when the dataset was prepared.
    pub fn recorded(version: ObjectVersion) -> Self {
        VersionPin {
            version: OnceLock::from(version),
            recorded: true,
            changed: AtomicBool::new(false),
        }
    }

    /// Checks the version an answer came from (pinning it if it is the first); the error says
    /// how the object changed.
    pub fn check(&self, seen: &ObjectVersion) -> Result<(), String> {
        let pinned = self.version.get_or_init(|| seen.clone());
        if pinned.same(seen) {
            return Ok(());
        }
        self.changed.store(true, Ordering::Relaxed);
        Err(if self.recorded {
            format!(
                "the object changed since the dataset was prepared: it was {}, it is {}",
                pinned.describe(),
                seen.describe()
            )
        } else {
            format!(
                "the object changed while it was read: it was {}, it is {}",
                pinned.describe(),
                seen.describe()
            )
        })
    }

    /// Whether an answer of another version was seen.
    pub fn changed(&self) -> bool {
        self.changed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(size: u64, e_tag: Option<&str>, time: Option<&str>) -> ObjectVersion {
        ObjectVersion {
            size,
            e_tag: e_tag.map(str::to_owned),
            last_modified: time.map(str::to_owned),
        }
    }

    #[test]
    fn the_tag_decides_where_both_have_one_else_the_time() {
        let a = version(10, Some("\"a\""), Some("t1"));
        assert!(a.same(&version(10, Some("\"a\""), Some("t2"))));
        assert!(!a.same(&version(10, Some("\"b\""), Some("t1"))));
        assert!(!a.same(&version(11, Some("\"a\""), Some("t1"))));
        assert!(a.same(&version(10, None, Some("t1"))));
        assert!(!a.same(&version(10, None, Some("t2"))));
    }

    #[test]
    fn a_pin_holds_to_the_first_or_the_recorded_version() {
        let pin = VersionPin::new();
        pin.check(&version(10, Some("\"a\""), None)).unwrap();
        pin.check(&version(10, Some("\"a\""), None)).unwrap();
        assert!(!pin.changed());
        let err = pin.check(&version(10, Some("\"b\""), None)).unwrap_err();
        assert!(err.contains("while it was read"), "{err}");
        assert!(
            err.ends_with("it was 10 bytes with ETag \"a\", it is 10 bytes with ETag \"b\""),
            "{err}"
        );
        assert!(pin.changed());

        let pin = VersionPin::recorded(version(10, Some("\"a\""), None));
        let err = pin.check(&version(12, Some("\"a\""), None)).unwrap_err();
        assert!(err.contains("since the dataset was prepared"), "{err}");
    }
}
