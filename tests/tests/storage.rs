//! Remote reads of one object, against a local S3 server behind a proxy that holds requests:
//! request priorities (a read the thread waits for never queues behind its own read-ahead), and
//! versions (an object replaced between two reads is an error, not bytes of another object).
//!
//! A test binary of its own, with one test: the storage options and the client's environment
//! are fixed at a process's first request.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use energon_index::storage::{self, ObjectVersion, RemoteObject, StorageOptions, VersionPin};
use energon_tests::s3::{Proxy, S3Server};

/// Waits until the proxy has seen `n` requests; false after 30 s.
fn seen(requests: &AtomicU64, n: u64) -> bool {
    let start = Instant::now();
    while requests.load(Ordering::SeqCst) < n {
        if start.elapsed() > Duration::from_secs(30) {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn remote_reads_of_one_object() {
    let server = S3Server::start();
    server.create_bucket("data");
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u8> = (0..8000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("obj"), &data).unwrap();
    server.put_file(&dir.path().join("obj"), "data", "obj");
    let proxy = Proxy::start(server.port());
    for (key, value) in S3Server::client_env(&proxy.endpoint()) {
        // SAFETY: this binary's only test sets the variables before its first request; no other
        // thread reads the environment meanwhile.
        unsafe { std::env::set_var(key, value) };
    }
    // One read-ahead request in flight per thread.
    let mut options = StorageOptions::from_env();
    options.in_flight = 1;
    assert!(storage::configure(options));
    a_waited_for_read_never_queues_behind_read_ahead(&proxy, &data);
    an_object_replaced_between_reads_is_an_error(&server, dir.path(), &data);
}

fn a_waited_for_read_never_queues_behind_read_ahead(proxy: &Proxy, data: &[u8]) {
    let url = Path::new("s3://data/obj");
    let obj = RemoteObject::open_sized(url, data.len() as u64).unwrap();
    let requests = &proxy.control.requests;

    // The thread's only permit is held by a read-ahead that the store does not answer; a
    // blocking read of the same thread still goes out.
    proxy.control.stall.store(true, Ordering::SeqCst);
    let reader = {
        let obj = obj.clone();
        thread::spawn(move || {
            obj.prefetch(0..1000).unwrap();
            storage::read_range(url, 2000..3000).unwrap()
        })
    };
    assert!(seen(requests, 2), "the blocking read waited for the read-ahead's permit");
    proxy.control.stall.store(false, Ordering::SeqCst);
    assert_eq!(reader.join().unwrap(), data[2000..3000]);

    // Read-ahead queued behind the permit goes out at once when the thread comes to need it.
    proxy.control.stall.store(true, Ordering::SeqCst);
    let before = requests.load(Ordering::SeqCst);
    let reader = {
        let obj = obj.clone();
        thread::spawn(move || {
            obj.prefetch(3000..4000).unwrap();
            // The thread's bound is reached: this read-ahead is left out, and the read below
            // starts the window itself.
            obj.prefetch(4000..5000).unwrap();
            obj.read_in(4000..5000, 4100..4200).unwrap()
        })
    };
    assert!(seen(requests, before + 2), "the read waited behind the read-ahead");
    proxy.control.stall.store(false, Ordering::SeqCst);
    assert_eq!(reader.join().unwrap(), data[4100..4200]);
    // The held read-ahead was answered too, and is served from the window cache.
    assert_eq!(obj.read_in(3000..4000, 3000..4000).unwrap(), data[3000..4000]);
}

/// Replaces `s3://data/obj` with `data` xor `mask` (the same size).
fn replace(server: &S3Server, dir: &Path, data: &[u8], mask: u8) {
    let other: Vec<u8> = data.iter().map(|b| b ^ mask).collect();
    std::fs::write(dir.join("other"), &other).unwrap();
    server.put_file(&dir.join("other"), "data", "obj");
}

fn an_object_replaced_between_reads_is_an_error(server: &S3Server, dir: &Path, data: &[u8]) {
    let url = Path::new("s3://data/obj");
    // Held to the first version read: a same-size replacement fails the next window's read.
    let obj = RemoteObject::open_sized(url, data.len() as u64).unwrap();
    assert_eq!(obj.read_in(0..1000, 0..1000).unwrap(), data[..1000]);
    replace(server, dir, data, 0xff);
    let err = obj.read_in(1000..2000, 1000..2000).unwrap_err().to_string();
    assert!(err.contains("changed while it was read"), "{err}");
    assert!(err.contains("s3://data/obj"), "{err}");
    assert!(obj.changed());
    // A window already fetched is still the first version's.
    assert_eq!(obj.read_in(0..1000, 0..1000).unwrap(), data[..1000]);

    // Held to a recorded version: the first read already fails, and so does an open that asks
    // the store for the size.
    let recorded = ObjectVersion {
        size: data.len() as u64,
        e_tag: Some("\"x\"".to_owned()),
        last_modified: None,
    };
    let pin = Arc::new(VersionPin::recorded(recorded));
    let obj = RemoteObject::open_pinned(url, Some(data.len() as u64), pin.clone()).unwrap();
    let err = obj.read(0..10).unwrap_err().to_string();
    assert!(err.contains("since the dataset was prepared"), "{err}");
    let err = RemoteObject::open_pinned(url, None, pin).unwrap_err().to_string();
    assert!(err.contains("since the dataset was prepared"), "{err}");

    // A version pinned by one open holds for the next open of the object.
    let pin = Arc::new(VersionPin::new());
    let obj = RemoteObject::open_pinned(url, Some(data.len() as u64), pin.clone()).unwrap();
    obj.read(0..10).unwrap();
    replace(server, dir, data, 0x0f);
    let obj = RemoteObject::open_pinned(url, Some(data.len() as u64), pin).unwrap();
    assert!(obj.read(0..10).is_err());
}
