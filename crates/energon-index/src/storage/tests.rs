//! The local side of the storage functions (the remote side is tested against a local S3 server
//! by the end-to-end tests).

use std::path::Path;

use bytes::Bytes;

use super::*;

#[test]
fn local_files_read_by_range_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.bin");
    write_atomic(&path, Bytes::from_static(b"0123456789")).unwrap();
    assert!(is_file(&path) && !is_dir(&path) && is_dir(dir.path()));
    assert_eq!(size(&path).unwrap(), 10);
    assert_eq!(read(&path).unwrap(), Bytes::from_static(b"0123456789"));
    assert_eq!(read_range(&path, 2..5).unwrap(), Bytes::from_static(b"234"));
    // A range past the end stops at the end of the file.
    assert_eq!(read_range(&path, 8..20).unwrap(), Bytes::from_static(b"89"));
    assert_eq!(local_file(&path).unwrap(), path);
    assert!(!is_remote(&path) && is_remote(Path::new("s3://b/k")));
    let err = list_files(dir.path()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[cfg(not(feature = "remote"))]
#[test]
fn remote_paths_need_the_feature() {
    let err = read(Path::new("s3://bucket/x")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::Unsupported);
    assert!(err.to_string().contains("s3://bucket/x"), "{err}");
}

#[test]
fn remote_errors_name_object_and_offset() {
    let err = RemoteError {
        url: "s3://b/shard.tar".to_owned(),
        range: Some(1024..2048),
        message: "request failed".to_owned(),
        not_found: false,
        timed_out: true,
    };
    let io_err = io::Error::from(err);
    assert_eq!(io_err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(
        io_err.to_string(),
        "s3://b/shard.tar at byte offset 1024 (bytes 1024..2048): request failed"
    );
    assert!(io_err.get_ref().unwrap().downcast_ref::<RemoteError>().is_some());
}
