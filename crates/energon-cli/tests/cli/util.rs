//! Test support: temporary dataset folders and running the `energon` binary.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use energon_tests::{TarFormat, WdsSpec};

/// A temporary folder, removed when dropped.
pub(crate) struct Dir {
    tmp: tempfile::TempDir,
}

impl Dir {
    pub(crate) fn new() -> Dir {
        Dir { tmp: tempfile::tempdir().unwrap() }
    }

    pub(crate) fn path(&self) -> &Path {
        self.tmp.path()
    }

    pub(crate) fn join(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// Copies the tar shards (not the index files) of the reference fixture into this folder.
    pub(crate) fn with_fixture_shards(self) -> Dir {
        let src = energon_tests::ref_small_dir().join("shards");
        fs::create_dir_all(self.join("shards")).unwrap();
        for entry in fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "tar") {
                let dst = self.join("shards").join(path.file_name().unwrap());
                fs::copy(&path, &dst).unwrap();
                let mut perms = fs::metadata(&dst).unwrap().permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                perms.set_readonly(false);
                fs::set_permissions(&dst, perms).unwrap();
            }
        }
        self
    }

    /// Writes a generated WebDataset into this folder.
    pub(crate) fn with_generated(self, shards: usize, per_shard: usize) -> Dir {
        let spec = WdsSpec { shards, per_shard, img: 16, ..WdsSpec::default() };
        energon_tests::write_wds(self.path(), &spec).unwrap();
        self
    }

    pub(crate) fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    }

    pub(crate) fn read_string(&self, rel: &str) -> String {
        String::from_utf8(self.read(rel)).unwrap()
    }
}

/// The `energon` binary under test.
pub(crate) fn energon() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_energon"));
    cmd.stdin(Stdio::null());
    cmd.env_remove("ENERGON_LOG");
    cmd
}

/// Runs a command and returns its output, with stdout and stderr as strings.
pub(crate) fn run(cmd: &mut Command) -> (Output, String, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stdout, stderr)
}

/// Runs a command that must succeed; returns stdout.
pub(crate) fn run_ok(cmd: &mut Command) -> String {
    let (out, stdout, stderr) = run(cmd);
    assert!(out.status.success(), "command failed: {cmd:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    stdout
}

/// Runs a command that must fail with exit code 2; returns stderr.
pub(crate) fn run_err(cmd: &mut Command) -> String {
    let (out, stdout, stderr) = run(cmd);
    assert_eq!(
        out.status.code(),
        Some(2),
        "expected exit code 2: {cmd:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stderr
}

/// Writes a tar file with the given members in the given format.
pub(crate) fn write_tar(path: &Path, members: &[(&str, &[u8])]) {
    let members: Vec<(String, Vec<u8>)> =
        members.iter().map(|(n, d)| ((*n).to_owned(), d.to_vec())).collect();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    energon_tests::write_tar(path, TarFormat::Ustar, &members).unwrap();
}

/// A snapshot of every file under a folder (relative path and bytes), for "nothing changed" checks.
pub(crate) fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.push((rel, fs::read(&path).unwrap()));
            }
        }
    }
    let mut res = Vec::new();
    walk(root, root, &mut res);
    res.sort();
    res
}
