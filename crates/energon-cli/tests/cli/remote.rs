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

use crate::util::{Dir, energon, run, run_err, run_ok, snapshot, write_tar};

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
                // insertion order (compared row by row below); only objects have versions.
                !name.ends_with("index.uuid")
                    && !name.ends_with(".prepare.lock")
                    && !name.ends_with("index.sqlite")
                    && !name.ends_with("object-versions.json")
            })
            .collect()
    };
    // The shards' versions, under this prepare's UUID.
    let record: serde_json::Value =
        serde_json::from_slice(&got.read(".nv-meta/object-versions.json")).unwrap();
    assert_eq!(
        record["index_uuid"].as_str().unwrap().as_bytes(),
        got.read(".nv-meta/index.uuid").as_slice()
    );
    assert_eq!(record["shards"].as_object().unwrap().len(), 4, "{record}");
    assert!(record["shards"]["shards/data-000000.tar"]["e_tag"].is_string(), "{record}");
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

/// A shard prepared in the bucket and then replaced by one of the same size and layout with other
/// keys is an error naming the shard, in the loader and in `lint`, until it is prepared again; a
/// record left by an earlier prepare (another `index.uuid`) is ignored.
#[test]
fn a_shard_object_changed_after_prepare_is_an_error() {
    let server = S3Server::start();
    server.create_bucket("data");
    let dir = Dir::new();
    let shard = |prefix: &str, content: &[u8]| {
        let names: Vec<String> = (0..10).map(|k| format!("{prefix}{k:04}.txt")).collect();
        let members: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), content)).collect();
        let path = dir.join(&format!("{prefix}.tar"));
        write_tar(&path, &members);
        path
    };
    server.put_file(&shard("a", b"0123456789"), "data", "ds/s-0.tar");
    server.put_file(&shard("b", b"0123456789"), "data", "ds/s-1.tar");
    let cache = Dir::new();
    let ep = server.endpoint();
    let prepare = || {
        run_ok(remote(&ep, cache.path()).args([
            "prepare",
            "s3://data/ds",
            "--no-progress",
            "--non-interactive",
            "--force-overwrite",
            "--split-ratio",
            "1,0,0",
            "--sample-type",
            "CrudeWebdataset",
        ]))
    };
    prepare();
    let trace = ["trace", "s3://data/ds", "--num-workers", "1"];
    let want = run_ok(remote(&ep, cache.path()).args(trace));
    assert!(want.contains("b0009"), "{want}");

    // The same layout, other keys: the bytes of the old index point at valid members.
    server.put_file(&shard("c", b"9876543210"), "data", "ds/s-1.tar");
    let err = run_err(remote(&ep, cache.path()).args(trace));
    assert!(err.contains("s-1.tar"), "{err}");
    assert!(err.contains("changed since the dataset was prepared"), "{err}");
    assert!(err.contains("run `energon prepare` again"), "{err}");
    assert!(!err.contains("c0000"), "no sample of the new object is handed out: {err}");
    let (out, stdout, stderr) = run(remote(&ep, cache.path()).args(["lint", "s3://data/ds"]));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("Error in shard s-1.tar"), "{stderr}");
    assert!(stderr.contains("changed since the dataset was prepared"), "{stderr}");

    // A record of an earlier prepare is ignored: the reader holds each shard to the first
    // version it reads.
    std::fs::write(dir.join("uuid"), "00000000-0000-0000-0000-000000000000").unwrap();
    server.put_file(&dir.join("uuid"), "data", "ds/.nv-meta/index.uuid");
    let got = run_ok(remote(&ep, cache.path()).args(trace));
    assert!(got.contains("c0009"), "{got}");

    prepare();
    assert_eq!(run_ok(remote(&ep, cache.path()).args(trace)), got);
}

/// `stdout` with every mention of the local `path` written as `url`, and the dataset's name
/// (what `info` calls it: the last path component) as the URL's.
fn as_remote(stdout: &str, path: &Path, url: &str) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    let url_name = url.rsplit('/').next().unwrap();
    stdout
        .replace(&path.display().to_string(), url)
        .replace(&format!("* {name}: "), &format!("* {url_name}: "))
}

#[test]
fn remote_preview_info_and_lint_print_what_local_ones_print() {
    let server = server_with_fixture();
    let cache = Dir::new();
    let ep = server.endpoint();
    let local = energon_tests::ref_small_dir();
    let jsonl = local.join("jsonl/data.jsonl");
    let cases: [(&[&str], &Path, &str); 5] = [
        (&["preview", "-n", "3", "--width", "16"], &local, "s3://data/ref"),
        (&["preview", "--non-interactive"], &jsonl, "s3://data/ref/jsonl/data.jsonl"),
        (&["info"], &local, "s3://data/ref"),
        (&["lint", "--parallel", "2"], &local, "s3://data/ref"),
        (&["lint"], &jsonl, "s3://data/ref/jsonl/data.jsonl"),
    ];
    for (args, path, url) in cases {
        let want = run_ok(energon().args(args).arg(path));
        let got = run_ok(remote(&ep, cache.path()).args(args).arg(url));
        assert_eq!(got, as_remote(&want, path, url), "{args:?} {url}");
        assert!(want.lines().count() >= 3, "{want}");
    }

    // Lint reads the shards from the store: a shard with the tar header of a middle sample
    // damaged (its size unchanged) is reported, with exit status 1.
    let shard = local.join("shards/data-000002.tar");
    let mut bytes = std::fs::read(&shard).unwrap();
    let idx = std::fs::read(local.join("shards/data-000002.tar.idx")).unwrap();
    let n = idx.len() / 8;
    let at = u64::from_le_bytes(idx[(n / 2) * 8..(n / 2) * 8 + 8].try_into().unwrap()) as usize;
    bytes[at..at + 512].fill(0xa5);
    let dir = Dir::new();
    let bad = dir.join("bad.tar");
    std::fs::write(&bad, &bytes).unwrap();
    server.put_file(&bad, "data", "ref/shards/data-000002.tar");
    let (out, stdout, stderr) =
        run(remote(&ep, cache.path()).args(["lint", "--parallel", "2", "s3://data/ref"]));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("data-000002.tar"), "{stderr}");
}

#[test]
fn remote_prepare_media_writes_what_a_local_one_writes() {
    let server = S3Server::start();
    server.create_bucket("data");
    let cache = Dir::new();
    let ep = server.endpoint();
    let dump = |db: &Path| energon_index::sqlite::dump_canonical(db).unwrap();

    // A prepared WebDataset: two runs, rows added to the tables of the first.
    let fixture = energon_tests::ref_small_dir();
    server.upload_dir(&fixture, "data", "ref");
    let local = Dir::new();
    energon_tests::copy_dir(&fixture, local.path()).unwrap();
    Command::new("chmod").args(["-R", "u+w"]).arg(local.path()).status().unwrap();
    let tmp = Dir::new();
    for flag in ["--media-metadata-by-extension", "--media-metadata-by-header"] {
        let want =
            run_ok(energon().arg("prepare-media").arg(local.path()).args(["--no-progress", flag]));
        let got = run_ok(
            remote(&ep, cache.path())
                .args(["prepare-media", "s3://data/ref", "--no-progress", flag, "--tmp-path"])
                .arg(tmp.path()),
        );
        assert_eq!(got, want, "{flag}");
        assert!(snapshot(tmp.path()).is_empty(), "the working folder is removed");
    }
    let got = Dir::new();
    server.download_dir("data", "ref/.nv-meta", got.path());
    let db = local.join(".nv-meta/index.sqlite");
    assert_eq!(dump(&got.join("index.sqlite")), dump(&db));
    assert!(dump(&db).contains("media_metadata"), "media rows were written");

    // A plain folder of media files becomes a filesystem dataset in the bucket.
    let folder = crate::media::media_folder();
    server.upload_dir(folder.path(), "data", "media");
    let flag = "--media-metadata-by-extension";
    let (_, want, want_err) =
        run(energon().arg("prepare-media").arg(folder.path()).args(["--no-progress", flag]));
    let (out, got, got_err) = run(remote(&ep, cache.path()).args([
        "prepare-media",
        "s3://data/media",
        "--no-progress",
        flag,
    ]));
    assert!(out.status.success(), "{got_err}");
    assert_eq!(got, want);
    assert_eq!(got_err, want_err);
    let got = Dir::new();
    server.download_dir("data", "media/.nv-meta", got.path());
    assert_eq!(dump(&got.join("index.sqlite")), dump(&folder.join(".nv-meta/index.sqlite")));

    // `prepare --media-metadata-by-...` of raw shards in the bucket: the index and the media
    // tables of a local prepare with the same flag.
    let shards = Dir::new().with_fixture_shards();
    server.upload_dir(shards.path(), "data", "raw");
    let flags = ["--non-interactive", "--split-ratio", "8,1,1", "--media-metadata-by-header"];
    run_ok(energon().arg("prepare").arg(shards.path()).args(flags));
    run_ok(remote(&ep, cache.path()).args(["prepare", "s3://data/raw"]).args(flags));
    let got = Dir::new();
    server.download_dir("data", "raw/.nv-meta", got.path());
    assert_eq!(dump(&got.join("index.sqlite")), dump(&shards.join(".nv-meta/index.sqlite")));
}

#[test]
fn remote_mount_serves_every_member_byte_for_byte() {
    if !crate::mount::fuse_available("remote_mount_serves_every_member_byte_for_byte") {
        return;
    }
    let server = server_with_fixture();
    let cache = Dir::new();
    let members = crate::mount::tar_members(&energon_tests::ref_small_dir());
    let dir = Dir::new();
    let mnt = dir.join("mnt");
    let cmd = remote(&server.endpoint(), cache.path());
    let mount = crate::mount::Mounted::start_with(cmd, Path::new("s3://data/ref"), &mnt, &[]);
    crate::mount::assert_serves(&mnt, &members);
    mount.stop();
}

#[test]
fn remote_join_traces_like_the_local_one() {
    let server = server_with_fixture();
    server.upload_dir(&energon_tests::ref_small_dir(), "data", "again");
    let cache = Dir::new();
    let ep = server.endpoint();
    let local = energon_tests::ref_small_dir();
    let join = |a: &str, b: &str| {
        format!(
            "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n  train:\n    join:\n      - path: {a}\n      - path: {b}\n    joiner:\n      __module__: megatron.energon\n      __class__: CaptioningSample\n"
        )
    };
    let dir = Dir::new();
    let local_yaml = dir.join("local.yaml");
    let l = local.display().to_string();
    std::fs::write(&local_yaml, join(&l, &l)).unwrap();
    let s3_yaml = dir.join("s3.yaml");
    std::fs::write(&s3_yaml, join("s3://data/ref", "s3://data/again")).unwrap();
    let in_bucket = dir.join("in-bucket.yaml");
    std::fs::write(&in_bucket, join("ref", "./again")).unwrap();
    server.put_file(&in_bucket, "data", "join.yaml");

    run_ok(energon().arg("prepare").arg(&local_yaml));
    run_ok(remote(&ep, cache.path()).arg("prepare").arg(&s3_yaml));
    // The join index of a metadataset in the bucket is written next to it, in the bucket.
    run_ok(remote(&ep, cache.path()).args(["prepare", "s3://data/join.yaml"]));
    let got = Dir::new();
    server.download_dir("data", "join.yaml.cache", got.path());
    let local_index = snapshot(&dir.join("local.yaml.cache"));
    assert_eq!(local_index.len(), 1);
    assert_eq!(snapshot(&dir.join("s3.yaml.cache")), local_index);
    assert_eq!(snapshot(got.path()), local_index);

    for args in
        [&["--num-workers", "2", "-n", "150"][..], &["--num-workers", "1", "--batch-size", "3"]]
    {
        let want = run_ok(energon().arg("trace").arg(&local_yaml).args(args));
        assert!(want.lines().count() >= 50, "{want}");
        let got = run_ok(remote(&ep, cache.path()).arg("trace").arg(&s3_yaml).args(args));
        assert_eq!(got, want, "join over s3:// datasets {args:?}");
        let got =
            run_ok(remote(&ep, cache.path()).args(["trace", "s3://data/join.yaml"]).args(args));
        assert_eq!(got, want, "join in the bucket {args:?}");
    }
}
