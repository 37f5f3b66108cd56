//! The FUSE file system of `energon mount`: an in-memory tree of folders and parts, reads from
//! the dataset's file store.

use std::{
    ffi::OsStr,
    path::Path,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::bail;
use bytes::Bytes;
use energon_index::{info::read_dataset_info, sqlite::SqliteIndex, tar_scan::split_key_part};
use energon_reader::{FileStore, WebdatasetFileStore};
use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, OpenFlags,
    ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyXattr, Request,
};
use rustc_hash::FxHashMap;

/// Name of the marker shown for keys found in several shards.
pub(super) const MULTI_WARN: &str = "WARNING_SAME_KEY_IN_MULTIPLE_TAR_FILES";

/// The dataset never changes while mounted; the kernel may cache for long.
const TTL: Duration = Duration::from_secs(3600);

/// The longest file name, in bytes, that the kernel accepts in a FUSE listing (`NAME_MAX`); one
/// longer name fails the whole listing.
const NAME_MAX: usize = 255;

#[derive(Debug)]
enum NodeKind {
    Dir {
        children: Vec<u64>,
    },
    /// A part: its entry name `<key>.<part>` in the store.
    File {
        entry: String,
    },
    /// An empty marker file.
    Marker,
}

#[derive(Debug)]
struct Node {
    name: String,
    parent: u64,
    size: u64,
    kind: NodeKind,
}

/// The folders and files of the mount, by inode number (the root is 1).
#[derive(Debug)]
pub(crate) struct Tree {
    nodes: Vec<Node>,
    by_name: FxHashMap<(u64, String), u64>,
    n_files: u64,
    /// Files left out because a component of their path is longer than [`NAME_MAX`], and the
    /// first of them.
    n_too_long: u64,
    first_too_long: Option<String>,
}

impl Tree {
    fn new() -> Self {
        let root = Node {
            name: String::new(),
            parent: 1,
            size: 0,
            kind: NodeKind::Dir { children: Vec::new() },
        };
        // Index 0 is unused: inode numbers start at 1.
        let unused = Node { name: String::new(), parent: 0, size: 0, kind: NodeKind::Marker };
        Tree {
            nodes: vec![unused, root],
            by_name: FxHashMap::default(),
            n_files: 0,
            n_too_long: 0,
            first_too_long: None,
        }
    }

    fn node(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(usize::try_from(ino).ok()?).filter(|_| ino >= 1)
    }

    /// The folder `path` (`/`-separated, relative to the root), created as needed.
    fn dir(&mut self, path: &str) -> u64 {
        let mut ino = 1;
        for component in path.split('/').filter(|c| !c.is_empty()) {
            ino = match self.by_name.get(&(ino, component.to_owned())) {
                Some(&child) => child,
                None => self.add(ino, component, 0, NodeKind::Dir { children: Vec::new() }),
            };
        }
        ino
    }

    fn add(&mut self, parent: u64, name: &str, size: u64, kind: NodeKind) -> u64 {
        let ino = self.nodes.len() as u64;
        if !matches!(kind, NodeKind::Dir { .. }) {
            self.n_files += 1;
        }
        self.nodes.push(Node { name: name.to_owned(), parent, size, kind });
        self.by_name.insert((parent, name.to_owned()), ino);
        if let NodeKind::Dir { children } = &mut self.nodes[parent as usize].kind {
            children.push(ino);
        }
        ino
    }

    /// Adds a file at `path` (its last component is the file name); a name that exists already
    /// is left as it is (the first shard wins). A path with a component longer than
    /// [`NAME_MAX`] bytes is left out (and noted), since no listing could show it.
    fn add_file(&mut self, path: &str, size: u64, kind: NodeKind) {
        if path.split('/').any(|c| c.len() > NAME_MAX) {
            self.n_too_long += 1;
            self.first_too_long.get_or_insert_with(|| path.to_owned());
            return;
        }
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let parent = self.dir(dir);
        if name.is_empty() || self.by_name.contains_key(&(parent, name.to_owned())) {
            return;
        }
        self.add(parent, name, size, kind);
    }

    /// Builds the tree of a dataset from its index: parts from `sample_parts`, or, in slow
    /// mode, from each sample's tar headers.
    pub(crate) fn build(
        root: &Path,
        index: &SqliteIndex,
        store: &WebdatasetFileStore,
        sample_folders: bool,
        allow_slow: bool,
    ) -> anyhow::Result<Tree> {
        let mut tree = Tree::new();
        let path_of = |key: &str, part: &str| {
            if sample_folders { format!("{key}/{part}") } else { format!("{key}.{part}") }
        };
        // The shard that holds the shown sample of each key.
        let mut first_shard: FxHashMap<String, u64> = FxHashMap::default();
        if index.has_sample_parts() {
            index.for_each_entry(|entry| {
                let Some((key, part)) = split_key_part(&entry.name) else { return Ok(()) };
                let first = *first_shard.entry(key.to_owned()).or_insert(entry.tar_file_id);
                if first == entry.tar_file_id {
                    let kind = NodeKind::File { entry: entry.name.clone() };
                    tree.add_file(&path_of(key, part), entry.size, kind);
                }
                Ok(())
            })?;
        } else if !allow_slow || !sample_folders {
            bail!(
                "the dataset was prepared with an older version of energon (its index.sqlite has no \
                 sample_parts table): re-run `energon prepare` on it, or mount it with \
                 --sample-folders --allow-slow"
            );
        } else {
            let n_shards = read_dataset_info(root)?.shard_counts.len() as u64;
            for tar_file_id in 0..n_shards {
                for sample in index.samples_of_shard(tar_file_id)? {
                    if first_shard.contains_key(&sample.sample_key) {
                        continue;
                    }
                    first_shard.insert(sample.sample_key.clone(), tar_file_id);
                    let (parts, _) = store.get_sample(&sample.sample_key)?;
                    for (part, data) in parts {
                        let entry = format!("{}.{part}", sample.sample_key);
                        let kind = NodeKind::File { entry };
                        tree.add_file(&path_of(&sample.sample_key, &part), data.len() as u64, kind);
                    }
                }
            }
        }
        let mut duplicates: Vec<String> =
            index.duplicate_keys()?.into_iter().map(|row| row.sample_key).collect();
        duplicates.dedup();
        for key in duplicates {
            let path = if sample_folders {
                format!("{key}/{MULTI_WARN}")
            } else {
                format!("{key}.{MULTI_WARN}")
            };
            tree.add_file(&path, 0, NodeKind::Marker);
        }
        if let Some(first) = &tree.first_too_long {
            tracing::warn!(
                "{}: left {} file(s) out of the mount, their names being longer than {NAME_MAX} \
                 bytes (the first: {first})",
                root.display(),
                tree.n_too_long
            );
        }
        Ok(tree)
    }
}

/// The mounted file system.
#[derive(Debug)]
pub(crate) struct EnergonFs {
    tree: Tree,
    store: WebdatasetFileStore,
    total_size: u64,
    mtime: SystemTime,
    uid: u32,
    gid: u32,
    next_handle: AtomicU64,
    /// Open files: a slice of the shard's memory map each.
    open: Mutex<FxHashMap<u64, Bytes>>,
}

impl EnergonFs {
    pub(crate) fn new(tree: Tree, store: WebdatasetFileStore, total_size: u64, db: &Path) -> Self {
        let mtime = std::fs::metadata(db).and_then(|m| m.modified()).unwrap_or(UNIX_EPOCH);
        EnergonFs {
            tree,
            store,
            total_size,
            mtime,
            uid: nix::unistd::getuid().as_raw(),
            gid: nix::unistd::getgid().as_raw(),
            next_handle: AtomicU64::new(1),
            open: Mutex::new(FxHashMap::default()),
        }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let node = self.tree.node(ino)?;
        let (kind, perm, nlink) = match node.kind {
            NodeKind::Dir { .. } => (FileType::Directory, 0o555, 2),
            NodeKind::File { .. } | NodeKind::Marker => (FileType::RegularFile, 0o444, 1),
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size: node.size,
            blocks: node.size.div_ceil(512),
            atime: self.mtime,
            mtime: self.mtime,
            ctime: self.mtime,
            crtime: self.mtime,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: 512,
            flags: 0,
        })
    }

    fn open_files(&self) -> std::sync::MutexGuard<'_, FxHashMap<u64, Bytes>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Filesystem for EnergonFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let Some(name) = name.to_str() else { return reply.error(Errno::ENOENT) };
        match self
            .tree
            .by_name
            .get(&(u64::from(parent), name.to_owned()))
            .and_then(|&i| self.attr(i))
        {
            Some(attr) => reply.entry(&TTL, &attr, Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(u64::from(ino)) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.0 & libc_accmode() != 0 {
            return reply.error(Errno::EROFS);
        }
        let data = match self.tree.node(u64::from(ino)).map(|n| &n.kind) {
            Some(NodeKind::File { entry }) => match self.store.get(entry) {
                Ok((data, _)) => data,
                Err(err) => {
                    tracing::error!("cannot read {entry}: {err}");
                    return reply.error(Errno::EIO);
                }
            },
            Some(NodeKind::Marker) => Bytes::new(),
            Some(NodeKind::Dir { .. }) => return reply.error(Errno::EISDIR),
            None => return reply.error(Errno::ENOENT),
        };
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.open_files().insert(fh, data);
        // The content never changes: let the kernel keep its page cache across opens.
        reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let Some(data) = self.open_files().get(&fh.0).cloned() else {
            return reply.error(Errno::EBADF);
        };
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(data.len());
        let end = start.saturating_add(size as usize).min(data.len());
        reply.data(&data[start..end]);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.open_files().remove(&fh.0);
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let ino = u64::from(ino);
        let Some(node) = self.tree.node(ino) else { return reply.error(Errno::ENOENT) };
        let NodeKind::Dir { children } = &node.kind else { return reply.error(Errno::ENOTDIR) };
        let dots = [(ino, FileType::Directory, "."), (node.parent, FileType::Directory, "..")];
        let entries = dots.into_iter().chain(children.iter().map(|&child| {
            let c = &self.tree.nodes[child as usize];
            let kind = if matches!(c.kind, NodeKind::Dir { .. }) {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            (child, kind, c.name.as_str())
        }));
        for (i, (child, kind, name)) in
            entries.enumerate().skip(usize::try_from(offset).unwrap_or(usize::MAX))
        {
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENODATA);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, size: u32, reply: ReplyXattr) {
        if size == 0 { reply.size(0) } else { reply.data(&[]) }
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: fuser::AccessFlags, reply: ReplyEmpty) {
        if self.tree.node(u64::from(ino)).is_none() {
            reply.error(Errno::ENOENT);
        } else if mask.contains(fuser::AccessFlags::W_OK) {
            reply.error(Errno::EROFS);
        } else {
            reply.ok();
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        reply.statfs(self.total_size / 512, 0, 0, self.tree.n_files, 0, 512, 1024, 512);
    }
}

/// `O_WRONLY | O_RDWR`: a read-only file system refuses both.
fn libc_accmode() -> i32 {
    nix::libc::O_WRONLY | nix::libc::O_RDWR
}
