//! `energon mount PATH MOUNTPOINT`: a prepared WebDataset as a read-only folder of files (FUSE).
//!
//! - Flat mode: every part is a file `<key>.<part>` in the root.
//! - `--sample-folders`: one folder per sample key, holding files named by part.
//!
//! Keys that contain `/` become nested folders. Of a key that occurs in several shards (indexes
//! older than energon 7.3), the parts of the first shard are shown, plus an empty marker file
//! `<key>.WARNING_SAME_KEY_IN_MULTIPLE_TAR_FILES` (flat) or `<key>/WARNING_SAME_KEY_IN_MULTIPLE_TAR_FILES`
//! (sample folders), as the reference does.
//!
//! The tree is built from `index.sqlite` when mounting. Opening a file looks the part up
//! through the dataset's [`WebdatasetFileStore`], which hands out a slice of the shard's memory
//! map: reads are served straight from the tar's byte range, nothing is buffered, and several
//! requests are served in parallel. Indexes without `sample_parts` (energon 6) need
//! `--sample-folders --allow-slow`: the parts are then found by reading each sample's tar
//! headers while mounting.
//!
//! The command stays in the foreground until the file system is unmounted (`fusermount -u
//! MOUNTPOINT`) or it receives Ctrl-C, SIGTERM or SIGHUP, which unmount cleanly; `--detach`
//! runs the same command in the background once the mount is up.

mod fs;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use clap::Args;
use energon_index::{INDEX_SQLITE, NV_META, discover, sqlite::SqliteIndex};
use energon_reader::WebdatasetFileStore;
use fuser::{Config, MountOption};
use nix::sys::signal::{SigSet, Signal};

/// Flags of `energon mount`, with the reference's names.
#[derive(Debug, Args)]
pub(crate) struct MountArgs {
    /// The prepared WebDataset folder.
    path: PathBuf,
    /// An empty folder to mount it on (created if missing).
    mountpoint: PathBuf,
    /// Mount in the background and return once the mount is up.
    #[arg(short = 'd', long)]
    detach: bool,
    /// One folder per sample, holding its parts, instead of all parts in one folder.
    #[arg(short = 's', long = "sample-folders")]
    sample_folders: bool,
    /// Allow reading the tar headers of every sample for datasets prepared without per-part
    /// rows (energon 6); needs --sample-folders.
    #[arg(short = 'w', long = "allow-slow")]
    allow_slow: bool,
    /// Threads serving file system requests.
    #[arg(long, default_value_t = 4, hide = true)]
    threads: usize,
}

pub(crate) fn run(args: MountArgs) -> anyhow::Result<u8> {
    // Ctrl-C and friends are taken by a waiting thread, not by the default handler that would
    // end the process with the file system still mounted. Threads inherit the blocked mask, so
    // it is set before any thread starts (the object-store client starts its threads on the
    // first request to a remote dataset).
    let mut signals = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        signals.add(signal);
    }
    if !args.detach {
        signals.thread_block().context("cannot block signals")?;
    }
    check_mountpoint(&args.mountpoint)?;
    if discover::classify(&args.path)? != discover::DatasetKind::WebDataset {
        bail!(
            "{} is not a prepared WebDataset (no .nv-meta/.info.json); only WebDatasets can be mounted",
            args.path.display()
        );
    }
    let db = args.path.join(NV_META).join(INDEX_SQLITE);
    let index = SqliteIndex::open(&db).with_context(|| format!("cannot open {}", db.display()))?;
    let store = WebdatasetFileStore::open(&args.path)?;
    outln!("Mounting {} at {}...", args.path.display(), args.mountpoint.display());
    let tree = fs::Tree::build(&args.path, &index, &store, args.sample_folders, args.allow_slow)?;
    if args.detach {
        // Everything that can go wrong with the dataset went wrong above, in the foreground.
        return detach(&args);
    }
    let total_size = index.total_size()?;
    let filesystem = fs::EnergonFs::new(tree, store, total_size, &db);

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::RO,
        MountOption::FSName(format!("energon:{}", args.path.display())),
        MountOption::Subtype("energon".to_owned()),
    ];
    config.n_threads = Some(args.threads.max(1));
    config.clone_fd = true;
    let session = fuser::spawn_mount(filesystem, &args.mountpoint, &config).with_context(|| {
        format!(
            "cannot mount on {} (is /dev/fuse available, and fusermount3 installed?)",
            args.mountpoint.display()
        )
    })?;
    outln!("Mount is ready to go.");

    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok(signal) = signals.wait() {
            let _ = tx.send(signal);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(signal) => {
                eprintln!("{signal}: unmounting {}", args.mountpoint.display());
                if fusermount(&args.mountpoint, false) {
                    session.join().context("the file system ended with an error")?;
                } else {
                    // Files are still open: detach the mount now; it goes away once they are
                    // closed (reads fail from now on, as the process ends).
                    eprintln!(
                        "{} is busy (files are open there); unmounting it lazily",
                        args.mountpoint.display()
                    );
                    if !fusermount(&args.mountpoint, true) {
                        bail!("cannot unmount {}", args.mountpoint.display());
                    }
                }
                return Ok(0);
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !session.guard.is_finished() => {}
            Err(_) => {
                // Unmounted from outside (`fusermount -u`).
                session.join().context("the file system ended with an error")?;
                outln!("Closing energon mount.");
                return Ok(0);
            }
        }
    }
}

/// Unmounts with `fusermount3 -u` (or `fusermount -u`), lazily with `lazy`; returns whether it
/// worked.
fn fusermount(mountpoint: &Path, lazy: bool) -> bool {
    ["fusermount3", "fusermount"].iter().any(|tool| {
        let mut cmd = Command::new(tool);
        cmd.arg("-u").arg("-q");
        if lazy {
            cmd.arg("-z");
        }
        cmd.arg("--").arg(mountpoint).stdout(Stdio::null()).stderr(Stdio::null());
        cmd.status().is_ok_and(|s| s.success())
    })
}

/// The mountpoint must be an empty folder; a missing one is created, as the reference does.
fn check_mountpoint(mountpoint: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(mountpoint) {
        Ok(meta) if !meta.is_dir() => {
            bail!("mountpoint {} is not a folder", mountpoint.display())
        }
        Ok(_) => {
            let mut entries = std::fs::read_dir(mountpoint)
                .with_context(|| format!("cannot list mountpoint {}", mountpoint.display()))?;
            if entries.next().is_some() {
                bail!("mountpoint {} is not empty; mount on an empty folder", mountpoint.display());
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(mountpoint)
            .with_context(|| format!("cannot create mountpoint {}", mountpoint.display())),
        Err(e) => {
            Err(e).with_context(|| format!("cannot open mountpoint {}", mountpoint.display()))
        }
    }
}

/// `--detach`: runs `energon mount` without it as a background process in its own process
/// group, and returns once the mount is up (or the process failed).
fn detach(args: &MountArgs) -> anyhow::Result<u8> {
    use std::os::unix::{fs::MetadataExt, process::CommandExt};

    let exe = std::env::current_exe().context("cannot find the energon executable")?;
    let dev_before = std::fs::metadata(&args.mountpoint)?.dev();
    let mut cmd = Command::new(exe);
    cmd.arg("mount").arg(&args.path).arg(&args.mountpoint);
    if args.sample_folders {
        cmd.arg("--sample-folders");
    }
    if args.allow_slow {
        cmd.arg("--allow-slow");
    }
    cmd.arg("--threads").arg(args.threads.to_string());
    // The background process keeps none of our standard streams, so that whoever reads them
    // (a pipe, a terminal) is not held up by it.
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
    let mut child = cmd.spawn().context("cannot start the background mount")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("the background mount failed ({status}); run without --detach to see why");
        }
        if std::fs::metadata(&args.mountpoint).is_ok_and(|m| m.dev() != dev_before) {
            outln!(
                "Mounted {} at {} in the background (process {}); unmount with `fusermount -u {}`",
                args.path.display(),
                args.mountpoint.display(),
                child.id(),
                args.mountpoint.display()
            );
            return Ok(0);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            bail!("the background mount did not come up within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
