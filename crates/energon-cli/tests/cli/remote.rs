//! Datasets in an object store: the reference fixture uploaded to a local S3 server (moto), read,
//! prepared and traced through `s3://` and `msc://` paths, against the same files on disk; and
//! the faults of a remote store (throttling, a store that stops answering, a killed server, a
//! truncated object).

use std::{
    path::Path,
    process::Command,
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use energon_tests::s3::{Proxy, S3Server};

use crate::util::{Dir, energon, run, run_err, run_ok, snapshot};

/// `energon` with the client environment of `endpoint` and a private cache folder.
fn remote(endpoint: &str, cache: &Path) -> Command {
    let mut cmd = energon();
    for (k, v) in S3Server::client_env(endpoint) {
        cmd.env(k, v);
    }
    cmd.env("ENERGON_STORAGE_CACHE_DIR", cache);
    cmd
}

/// A server holding the prepared fixture at `s3://data/ref`.
fn server_with_fixture() -> S3Server {
    let server = S3Server::start();
    server.create_bucket("data");
    server.upload_dir(&energon_tests::ref_small_dir(), "data", "ref");
    server
}

const TRACE_CONFIGS: [&[&str]; 3] = [
    &["--num-workers", "2"],
    &[
        "--num-workers",
        "3",
        "--shuffle-buffer-size",
        "10",
        "--batch-size",
        "4",
        "--world-size",
        "2",
        "--rank",
        "1",
    ],
    &["--num-workers", "1", "--parallel-shard-iters", "2", "--seed-offset", "7"],
];

#[test]
fn remote_dataset_and_jsonl_trace_like_local() {
    let server = server_with_fixture();
    let cache = Dir::new();
    let local = energon_tests::ref_small_dir();
    let ep = server.endpoint();
    for args in TRACE_CONFIGS {
        let want = run_ok(energon().arg("trace").arg(&local).args(args));
        let got = run_ok(remote(&ep, cache.path()).args(["trace", "s3://data/ref"]).args(args));
        assert_eq!(got, want, "trace {args:?}");
        assert!(want.lines().count() >= 100, "{want}");
    }
    let jsonl = local.join("jsonl/data.jsonl");
    let want = run_ok(energon().arg("trace").arg(&jsonl).args(["--num-workers", "2"]));
    let got = run_ok(remote(&ep, cache.path()).args([
        "trace",
        "s3://data/ref/jsonl/data.jsonl",
        "--num-workers",
        "2",
    ]));
    assert_eq!(got, want);

    let info = run_ok(remote(&ep, cache.path()).args(["info", "s3://data/ref"]));
    assert!(info.contains("`s3://data/ref` (200 samples, 760.00 KiB in 4 shards)"), "{info}");
    let bench =
        run_ok(remote(&ep, cache.path()).args(["benchmark", "s3://data/ref", "--samples", "300"]));
    assert!(bench.contains("samples/s"), "{bench}");

    // A metadataset in the bucket with relative paths, one on disk with s3:// paths; an aux
    // source in the bucket. Both trace like the local metadataset.
    let v2 = "__module__: megatron.energon\n__class__: MetadatasetV2\n";
    let meta = Dir::new();
    let local_yaml = meta.join("local.yaml");
    std::fs::write(
        &local_yaml,
        format!(
            "{v2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: {}}}\n      - {{weight: 2, path: {}, aux: {{media: {}}}}}\n",
            local.display(),
            jsonl.display(),
            local.display()
        ),
    )
    .unwrap();
    let in_bucket = meta.join("meta.yaml");
    std::fs::write(
        &in_bucket,
        format!(
            "{v2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: ref}}\n      - {{weight: 2, path: ref/jsonl/data.jsonl, aux: {{media: ./ref}}}}\n"
        ),
    )
    .unwrap();
    server.put_file(&in_bucket, "data", "meta.yaml");
    let s3_yaml = meta.join("s3.yaml");
    std::fs::write(
        &s3_yaml,
        format!(
            "{v2}splits:\n  train:\n    blend:\n      - {{weight: 1, path: s3://data/ref}}\n      - {{weight: 2, path: s3://data/ref/jsonl/data.jsonl, aux: {{media: s3://data/ref}}}}\n"
        ),
    )
    .unwrap();
    let args = ["--num-workers", "2", "-n", "150"];
    let want = run_ok(energon().arg("trace").arg(&local_yaml).args(args));
    let got = run_ok(remote(&ep, cache.path()).args(["trace", "s3://data/meta.yaml"]).args(args));
    assert_eq!(got, want, "metadataset in the bucket");
    let got = run_ok(remote(&ep, cache.path()).arg("trace").arg(&s3_yaml).args(args));
    assert_eq!(got, want, "metadataset with s3:// paths");

    // msc://PROFILE/PATH through a multi-storage-client configuration naming this server.
    let msc = meta.join("msc.yaml");
    std::fs::write(
        &msc,
        format!(
            "profiles:\n  store:\n    storage_provider:\n      type: s3\n      options:\n        base_path: data/ref\n        endpoint_url: {ep}\n        region_name: us-east-1\n    credentials_provider:\n      type: S3Credentials\n      options:\n        access_key: test\n        secret_key: test\n"
        ),
    )
    .unwrap();
    let want = run_ok(energon().arg("trace").arg(&local).args(TRACE_CONFIGS[0]));
    let mut cmd = energon();
    cmd.env("MSC_CONFIG", &msc).env("ENERGON_STORAGE_CACHE_DIR", cache.path());
    let got = run_ok(cmd.args(["trace", "msc://store"]).args(TRACE_CONFIGS[0]));
    assert_eq!(got, want, "msc:// profile");
}

#[test]
fn remote_prepare_writes_what_a_local_prepare_writes() {
    let server = S3Server::start();
    server.create_bucket("data");
    let shards = Dir::new().with_fixture_shards();
    server.upload_dir(shards.path(), "data", "raw");
    let cache = Dir::new();
    let tmp = Dir::new();
    let flags = ["--non-interactive", "--split-ratio", "8,1,1"];
    run_ok(
        remote(&server.endpoint(), cache.path())
            .args(["prepare", "s3://data/raw", "--tmp-path"])
            .arg(tmp.path())
            .args(flags),
    );
    // Nothing is left in the temporary folder.
    assert!(snapshot(tmp.path()).is_empty());
    run_ok(energon().arg("prepare").arg(shards.path()).args(flags));
    let got = Dir::new();
    server.download_dir("data", "raw", got.path());
    let files = |dir: &Path| -> Vec<(String, Vec<u8>)> {
        snapshot(dir)
            .into_iter()
            .filter(|(name, _)| {
                // The UUID is random; the lock file exists only on disk; SQLite's pages depend on
                // insertion order (compared row by row below).
                !name.ends_with("index.uuid")
                    && !name.ends_with(".prepare.lock")
                    && !name.ends_with("index.sqlite")
            })
            .collect()
    };
    let (remote_files, local_files) = (files(got.path()), files(shards.path()));
    assert_eq!(
        remote_files.iter().map(|f| &f.0).collect::<Vec<_>>(),
        local_files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert_eq!(remote_files, local_files);
    let dump = |dir: &Path| {
        energon_index::sqlite::dump_canonical(&dir.join(".nv-meta/index.sqlite")).unwrap()
    };
    assert_eq!(dump(got.path()), dump(shards.path()));
    assert_eq!(got.read(".nv-meta/index.uuid").len(), 36);
    // The prepared remote dataset traces like the local one.
    let want = run_ok(energon().arg("trace").arg(shards.path()).args(TRACE_CONFIGS[0]));
    let got = run_ok(
        remote(&server.endpoint(), cache.path())
            .args(["trace", "s3://data/raw"])
            .args(TRACE_CONFIGS[0]),
    );
    assert_eq!(got, want);
}

#[test]
fn throttling_is_retried_and_a_silent_store_fails_in_time() {
    let server = server_with_fixture();
    let proxy = Proxy::start(server.port());
    let cache = Dir::new();
    let want =
        run_ok(energon().arg("trace").arg(energon_tests::ref_small_dir()).args(TRACE_CONFIGS[1]));
    proxy.control.throttle_every.store(3, Ordering::SeqCst);
    let got = run_ok(
        remote(&proxy.endpoint(), cache.path())
            .args(["trace", "s3://data/ref"])
            .args(TRACE_CONFIGS[1]),
    );
    assert_eq!(got, want);
    assert!(proxy.control.throttled.load(Ordering::SeqCst) > 3);

    // A store that stops answering: the deadline (3 s) ends every request.
    proxy.control.throttle_every.store(0, Ordering::SeqCst);
    proxy.control.stall.store(true, Ordering::SeqCst);
    let start = Instant::now();
    let err = run_err(
        remote(&proxy.endpoint(), cache.path())
            .env("ENERGON_STORAGE_DEADLINE_S", "3")
            .env("ENERGON_STORAGE_REQUEST_TIMEOUT_S", "1")
            .args(["trace", "s3://data/ref"]),
    );
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert!(err.contains("s3://data/ref"), "{err}");
    proxy.control.stall.store(false, Ordering::SeqCst);
}

#[test]
fn killed_server_fails_clearly_and_the_loader_resumes_exactly() {
    let mut server = server_with_fixture();
    let cache = Dir::new();
    let state = Dir::new();
    let st = state.join("state.json");
    let args = ["--num-workers", "2", "--shuffle-buffer-size", "8"];
    let full = run_ok(
        energon().arg("trace").arg(energon_tests::ref_small_dir()).args(args).args(["-n", "260"]),
    );
    let first = run_ok(
        remote(&server.endpoint(), cache.path())
            .args(["trace", "s3://data/ref", "--save-after-batches", "60", "--state-out"])
            .arg(&st)
            .args(args),
    );
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(first.lines().collect::<Vec<_>>(), lines[..60]);
    // The store goes away mid-epoch: a clear error naming the object, within the deadline.
    server.kill();
    let start = Instant::now();
    let (out, _, stderr) = run(remote(&server.endpoint(), cache.path())
        .env("ENERGON_STORAGE_DEADLINE_S", "3")
        .env("ENERGON_STORAGE_REQUEST_TIMEOUT_S", "1")
        .args(["trace", "s3://data/ref", "--restore"])
        .arg(&st)
        .args(args));
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert!(stderr.contains("s3://data/ref") && stderr.contains("HEAD"), "{stderr}");
    // Back again (moto keeps nothing: the objects are uploaded anew); the saved state continues
    // with exactly the next sample.
    server.restart();
    server.create_bucket("data");
    server.upload_dir(&energon_tests::ref_small_dir(), "data", "ref");
    let rest = run_ok(
        remote(&server.endpoint(), cache.path())
            .args(["trace", "s3://data/ref", "--restore"])
            .arg(&st)
            .args(args)
            .args(["-n", "200"]),
    );
    assert_eq!(rest.lines().collect::<Vec<_>>(), lines[60..]);
}

#[test]
fn truncated_object_is_an_error_naming_shard_and_offset() {
    let server = server_with_fixture();
    let cache = Dir::new();
    let dir = Dir::new();
    let shard = energon_tests::ref_small_dir().join("shards/data-000001.tar");
    let bytes = std::fs::read(&shard).unwrap();
    let cut = dir.join("cut.tar");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    server.put_file(&cut, "data", "ref/shards/data-000001.tar");
    let err = run_err(remote(&server.endpoint(), cache.path()).args(["trace", "s3://data/ref"]));
    assert!(err.contains("data-000001.tar"), "{err}");
    assert!(err.contains("truncated"), "{err}");
}
