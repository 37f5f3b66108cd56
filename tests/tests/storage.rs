//! Request priorities of remote reads, against a local S3 server behind a proxy that holds
//! requests: a read the thread waits for never queues behind its own read-ahead.
//!
//! A test binary of its own: the storage options and the client's environment are fixed at a
//! process's first request.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    sync::atomic::{AtomicU64, Ordering},
    thread,
    time::{Duration, Instant},
};

use energon_index::storage::{self, RemoteObject, StorageOptions};
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
fn a_waited_for_read_never_queues_behind_read_ahead() {
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
    assert!(storage::configure(StorageOptions { in_flight: 1, ..StorageOptions::from_env() }));
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
