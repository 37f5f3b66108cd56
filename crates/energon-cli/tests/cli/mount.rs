//! `energon mount`: real FUSE mounts of the fixture, read with ordinary file I/O.
//!
//! These tests need `/dev/fuse` and `fusermount3` (CI installs `fuse3`). Where either is
//! missing they fail with a message saying so, unless `ENERGON_SKIP_FUSE_TESTS=1` is set, in
//! which case they print a loud `SKIPPED` line and return: a missing FUSE never passes
//! unnoticed.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::{sys::signal::Signal, unistd::Pid};
use rusqlite::Connection;

use crate::util::{Dir, energon, run, run_err};

/// Whether FUSE mounts can be tested here; fails (or, when told to, skips loudly) otherwise.
// The skip must be seen: it goes to standard error, shown with `--nocapture`.
#[allow(clippy::print_stderr)]
pub(crate) fn fuse_available(test: &str) -> bool {
    let has_dev = Path::new("/dev/fuse").exists();
    let has_tool = Command::new("fusermount3").arg("-V").output().is_ok_and(|o| o.status.success());
    if has_dev && has_tool {
        return true;
    }
    let what = if has_dev { "fusermount3 (package fuse3)" } else { "/dev/fuse" };
    if std::env::var_os("ENERGON_SKIP_FUSE_TESTS").is_some_and(|v| v == "1") {
        eprintln!("\n*** SKIPPED {test}: {what} is missing and ENERGON_SKIP_FUSE_TESTS=1 ***\n");
        return false;
    }
    panic!(
        "{test} needs {what} to mount a FUSE file system; install fuse3 and run where /dev/fuse \
         exists, or set ENERGON_SKIP_FUSE_TESTS=1 to skip the mount tests explicitly"
    );
}

/// A writable copy of the reference fixture.
fn fixture_copy() -> Dir {
    let dir = Dir::new();
    let ds = dir.join("ds");
    energon_tests::copy_dir(&energon_tests::ref_small_dir(), &ds).unwrap();
    Command::new("chmod").args(["-R", "u+w"]).arg(&ds).status().unwrap();
    dir
}

/// Every tar member of the fixture's shards: name → content, in shard order.
pub(crate) fn tar_members(ds: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut res = BTreeMap::new();
    for i in 0..4 {
        let data = fs::read(ds.join(format!("shards/data-{i:06}.tar"))).unwrap();
        let mut archive = tar::Archive::new(&data[..]);
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            res.entry(name).or_insert(bytes);
        }
    }
    res
}

/// A running `energon mount`, unmounted with SIGINT when dropped.
pub(crate) struct Mounted {
    child: Option<Child>,
    mountpoint: PathBuf,
}

impl Mounted {
    fn start(ds: &Path, mountpoint: &Path, extra: &[&str]) -> Mounted {
        Mounted::start_with(energon(), ds, mountpoint, extra)
    }

    /// Like [`Mounted::start`], running `cmd` (`energon` with an environment of its own).
    pub(crate) fn start_with(
        mut cmd: Command,
        ds: &Path,
        mountpoint: &Path,
        extra: &[&str],
    ) -> Mounted {
        fs::create_dir_all(mountpoint).unwrap();
        let dev = fs::metadata(mountpoint).unwrap().dev();
        let child = cmd
            .arg("mount")
            .arg(ds)
            .arg(mountpoint)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut mounted = Mounted { child: Some(child), mountpoint: mountpoint.to_owned() };
        let deadline = Instant::now() + Duration::from_secs(30);
        while fs::metadata(mountpoint).unwrap().dev() == dev {
            if let Some(status) = mounted.child.as_mut().unwrap().try_wait().unwrap() {
                let out = mounted.child.take().unwrap().wait_with_output().unwrap();
                panic!("energon mount exited ({status}): {}", String::from_utf8_lossy(&out.stderr));
            }
            assert!(Instant::now() < deadline, "the mount did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        mounted
    }

    /// Sends Ctrl-C and checks that the command unmounts and exits cleanly.
    pub(crate) fn stop(mut self) -> String {
        let child = self.child.take().unwrap();
        nix::sys::signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert_eq!(fs::read_dir(&self.mountpoint).unwrap().count(), 0, "unmounted");
        stderr
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = nix::sys::signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
            let _ = child.wait();
        }
    }
}

/// The flat mount at `mnt` lists exactly `members`, and every file reads (with ordinary file I/O,
/// four threads at a time) as its member, with its size.
pub(crate) fn assert_serves(mnt: &Path, members: &BTreeMap<String, Vec<u8>>) {
    let mut listed: Vec<String> =
        fs::read_dir(mnt).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    listed.sort();
    assert_eq!(listed, members.keys().cloned().collect::<Vec<_>>());
    let names: Vec<&String> = members.keys().collect();
    std::thread::scope(|scope| {
        for chunk in names.chunks(names.len().div_ceil(4).max(1)) {
            scope.spawn(move || {
                for name in chunk {
                    let path = mnt.join(name);
                    assert_eq!(fs::metadata(&path).unwrap().len(), members[*name].len() as u64);
                    assert_eq!(&fs::read(&path).unwrap(), &members[*name], "{name}");
                }
            });
        }
    });
}

#[test]
fn flat_mount_serves_every_member_byte_for_byte() {
    if !fuse_available("flat_mount_serves_every_member_byte_for_byte") {
        return;
    }
    let dir = fixture_copy();
    let ds = dir.join("ds");
    let members = tar_members(&ds);
    assert_eq!(members.len(), 600);
    let mnt = dir.join("mnt");
    let mount = Mounted::start(&ds, &mnt, &[]);
    assert_serves(&mnt, &members);
    // Partial reads at an offset.
    let mut file = fs::File::open(mnt.join("00000123.jpg")).unwrap();
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(100)).unwrap();
    let mut buf = [0u8; 10];
    std::io::Read::read_exact(&mut file, &mut buf).unwrap();
    assert_eq!(&buf, &members["00000123.jpg"][100..110]);
    drop(file);
    // Read-only, and `statfs` reports 512-byte blocks of the total sample bytes and the file count.
    assert!(fs::write(mnt.join("new.txt"), b"x").is_err());
    assert!(fs::OpenOptions::new().write(true).open(mnt.join("00000000.txt")).is_err());
    let total: i64 = Connection::open(ds.join(".nv-meta/index.sqlite"))
        .unwrap()
        .query_row("SELECT SUM(byte_size) FROM samples", [], |r| r.get(0))
        .unwrap();
    let stat = Command::new("stat").args(["-f", "-c", "%S %b %c"]).arg(&mnt).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&stat.stdout).trim(), format!("512 {} 600", total / 512));
    let stderr = mount.stop();
    assert!(stderr.contains("unmounting"), "{stderr}");
}

#[test]
fn sample_folders_duplicate_keys_and_slow_mode() {
    if !fuse_available("sample_folders_duplicate_keys_and_slow_mode") {
        return;
    }
    let dir = fixture_copy();
    let ds = dir.join("ds");
    let members = tar_members(&ds);
    let mnt = dir.join("mnt");

    let mount = Mounted::start(&ds, &mnt, &["--sample-folders"]);
    assert_eq!(fs::read_dir(&mnt).unwrap().count(), 200);
    let mut parts: Vec<String> = fs::read_dir(mnt.join("00000042"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    parts.sort();
    assert_eq!(parts, ["jpg", "json", "txt"]);
    assert_eq!(fs::read(mnt.join("00000042/json")).unwrap(), members["00000042.json"]);
    assert!(fs::metadata(mnt.join("00000042")).unwrap().is_dir());
    mount.stop();

    // An energon 7.0-7.2 index (non-unique keys) where key 00000000 also names a sample of the
    // second shard: the first shard's parts are shown, plus the reference's marker file.
    let db = ds.join(".nv-meta/index.sqlite");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE samples_old (tar_file_id INTEGER, sample_key TEXT, sample_index INTEGER, \
         byte_offset INTEGER, byte_size INTEGER);
         INSERT INTO samples_old SELECT * FROM samples;
         UPDATE samples_old SET sample_key = '00000000' WHERE sample_key = '00000050';
         DROP TABLE samples; ALTER TABLE samples_old RENAME TO samples;",
    )
    .unwrap();
    drop(conn);
    let mount = Mounted::start(&ds, &mnt, &[]);
    let marker = mnt.join("00000000.WARNING_SAME_KEY_IN_MULTIPLE_TAR_FILES");
    assert_eq!(fs::read(&marker).unwrap(), b"");
    assert_eq!(fs::read(mnt.join("00000000.jpg")).unwrap(), members["00000000.jpg"]);
    assert!(!mnt.join("00000050.jpg").exists());
    mount.stop();
    let mount = Mounted::start(&ds, &mnt, &["-s"]);
    assert!(mnt.join("00000000/WARNING_SAME_KEY_IN_MULTIPLE_TAR_FILES").exists());
    assert_eq!(fs::read(mnt.join("00000000/txt")).unwrap(), members["00000000.txt"]);
    mount.stop();

    // Without sample_parts (energon 6): only --sample-folders --allow-slow works.
    Connection::open(&db).unwrap().execute_batch("DROP TABLE sample_parts").unwrap();
    let err = run_err(energon().arg("mount").arg(&ds).arg(&mnt));
    assert!(err.contains("--allow-slow"), "{err}");
    let err = run_err(energon().arg("mount").arg(&ds).arg(&mnt).arg("-w"));
    assert!(err.contains("--sample-folders --allow-slow"), "{err}");
    let mount = Mounted::start(&ds, &mnt, &["-s", "-w"]);
    assert_eq!(fs::read(mnt.join("00000199/jpg")).unwrap(), members["00000199.jpg"]);
    assert_eq!(fs::read(mnt.join("00000001/json")).unwrap(), members["00000001.json"]);
    // Ctrl-C with a file still open: the mount is detached lazily and the command ends.
    let open = fs::File::open(mnt.join("00000001/txt")).unwrap();
    let stderr = mount.stop();
    assert!(stderr.contains("unmounting it lazily"), "{stderr}");
    drop(open);
}

#[test]
fn detach_returns_once_mounted() {
    if !fuse_available("detach_returns_once_mounted") {
        return;
    }
    let dir = fixture_copy();
    let ds = dir.join("ds");
    let mnt = dir.join("mnt");
    let (out, stdout, stderr) = run(energon().arg("mount").arg(&ds).arg(&mnt).arg("--detach"));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("in the background (process "), "{stdout}");
    let pid: i32 =
        stdout.split("(process ").nth(1).unwrap().split(')').next().unwrap().parse().unwrap();
    assert_eq!(fs::read_dir(&mnt).unwrap().count(), 600);
    let status = Command::new("fusermount3").arg("-u").arg(&mnt).status().unwrap();
    assert!(status.success());
    // The background process ends once unmounted.
    let deadline = Instant::now() + Duration::from_secs(30);
    while nix::sys::signal::kill(Pid::from_raw(pid), None).is_ok() {
        assert!(Instant::now() < deadline, "the background mount did not end");
        std::thread::sleep(Duration::from_millis(20));
        // Reap it if it is our child's child (it is not: it was reparented).
    }
}

#[test]
fn bad_mountpoints_and_datasets_are_clear_errors() {
    // No FUSE needed: these fail before mounting.
    let dir = fixture_copy();
    let ds = dir.join("ds");
    let file = dir.join("file");
    fs::write(&file, b"x").unwrap();
    let err = run_err(energon().arg("mount").arg(&ds).arg(&file));
    assert!(err.contains("is not a folder"), "{err}");
    let full = dir.join("full");
    fs::create_dir_all(full.join("x")).unwrap();
    let err = run_err(energon().arg("mount").arg(&ds).arg(&full));
    assert!(err.contains("is not empty"), "{err}");
    let err = run_err(energon().arg("mount").arg(dir.join("nope")).arg(dir.join("m1")));
    assert!(err.contains("nope"), "{err}");
    let plain = dir.join("plain");
    fs::create_dir_all(&plain).unwrap();
    let err = run_err(energon().arg("mount").arg(&plain).arg(dir.join("m2")));
    assert!(err.contains("not a prepared WebDataset"), "{err}");
}

#[test]
fn names_over_the_file_name_limit_are_left_out_with_a_warning() {
    if !fuse_available("names_over_the_file_name_limit_are_left_out_with_a_warning") {
        return;
    }
    let dir = Dir::new();
    let ds = dir.join("ds");
    let long_key = "k".repeat(300);
    let members: Vec<(String, Vec<u8>)> = [
        ("a.txt".to_owned(), b"first".to_vec()),
        (format!("{long_key}.txt"), b"long".to_vec()),
        ("b.txt".to_owned(), b"last".to_vec()),
    ]
    .into();
    fs::create_dir_all(ds.join("shards")).unwrap();
    energon_tests::write_tar(&ds.join("shards/a.tar"), energon_tests::TarFormat::Gnu, &members)
        .unwrap();
    crate::util::run_ok(energon().arg("prepare").arg(&ds).args([
        "--no-progress",
        "--non-interactive",
        "--split-ratio",
        "1,0,0",
        "--skip-dataset-yaml",
    ]));
    let mnt = dir.join("mnt");
    for (flags, listed) in [(&[][..], ["a.txt", "b.txt"]), (&["-s"][..], ["a", "b"])] {
        let mount = Mounted::start(&ds, &mnt, flags);
        let mut names: Vec<String> = fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, listed, "{flags:?}");
        let stderr = mount.stop();
        assert!(stderr.contains("left 1 file(s) out") && stderr.contains(&long_key), "{stderr}");
    }
}
