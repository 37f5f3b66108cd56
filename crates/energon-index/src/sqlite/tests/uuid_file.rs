//! `index.uuid`: format, atomic replacement, verbatim reading.

use std::fs;

use super::ref_small;
use crate::{
    Error, INDEX_UUID,
    sqlite::{read_index_uuid, write_index_uuid},
};

#[test]
fn written_uuid_is_a_36_char_version_4_string() {
    let dir = tempfile::tempdir().unwrap();
    let uuid = write_index_uuid(dir.path()).unwrap();
    let bytes = fs::read(dir.path().join(INDEX_UUID)).unwrap();
    assert_eq!(bytes, uuid.as_bytes());
    assert_eq!(bytes.len(), 36);
    assert!(!uuid.contains('\n'));
    assert_eq!(uuid, uuid.to_lowercase());
    let parsed = uuid::Uuid::parse_str(&uuid).unwrap();
    assert_eq!(parsed.get_version_num(), 4);
    assert_eq!(read_index_uuid(dir.path()).unwrap(), uuid);
}

#[test]
fn rewriting_replaces_the_uuid_and_leaves_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_index_uuid(dir.path()).unwrap();
    let second = write_index_uuid(dir.path()).unwrap();
    assert_ne!(first, second);
    assert_eq!(read_index_uuid(dir.path()).unwrap(), second);
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, [INDEX_UUID]);
}

#[test]
fn reference_uuid_reads_verbatim() {
    let meta = ref_small().join(".nv-meta");
    let uuid = read_index_uuid(&meta).unwrap();
    assert_eq!(uuid.len(), 36);
    assert_eq!(uuid.as_bytes(), fs::read(meta.join(INDEX_UUID)).unwrap());

    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(INDEX_UUID), "abc\n").unwrap();
    assert_eq!(read_index_uuid(dir.path()).unwrap(), "abc\n", "no trimming");
}

#[test]
fn uuid_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let err = write_index_uuid(&missing).unwrap_err();
    assert!(matches!(&err, Error::Io { path, .. } if path == &missing.join(INDEX_UUID)), "{err:?}");
    assert!(fs::read_dir(dir.path()).unwrap().next().is_none());
    let err = read_index_uuid(dir.path()).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
    fs::write(dir.path().join(INDEX_UUID), b"ab\xffcd").unwrap();
    let err = read_index_uuid(dir.path()).unwrap_err();
    assert!(
        matches!(&err, Error::BadMetadata { reason, .. } if reason.contains("byte offset 2")),
        "{err:?}"
    );
}
