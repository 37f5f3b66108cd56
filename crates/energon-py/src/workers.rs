//! Worker processes: one local worker's pipeline served from a process of its own, and the
//! main process's link to it (energon-cook's `WorkerLink`), so that Python hooks run in parallel.
//!
//! A worker process (started by `energon_rs.workers`, by fork, spawn or forkserver) calls
//! `_serve_worker`: it builds its worker's pipeline from the same settings and restored state as
//! the main process's loader, runs it, converts each item into the Python object the loader
//! hands out, and writes it to its socket as a frame. The main process's loader reads the frames
//! through [`ProcessLink`]s, one per worker, with energon-cook's round robin and checkpoint
//! bookkeeping, so keys, order and saved states are those of worker threads.
//!
//! A frame is a fixed header (kind, counts, lengths), the item's restore key and the pipeline's
//! state after it (postcard), and the pickled item. Arrays travel out of band: the Python side
//! writes them into one memfd per item, whose descriptor goes with the frame (`SCM_RIGHTS`), and
//! the main process maps it, so their bytes are copied once and never pickled. A segment has no
//! name: it is gone when the last array over it is.
//!
//! Flow control: a worker has at most `prefetch_factor` frames that the main process has not
//! read; the main process acknowledges each frame it reads with one byte. A worker whose main
//! process is gone sees the end of its socket and stops (and is killed by the kernel when the
//! main process dies: `PR_SET_PDEATHSIG`).

use std::{
    io::{IoSlice, IoSliceMut, Read, Write},
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::net::UnixStream,
    },
    sync::Arc,
    time::{Duration, Instant},
};

use energon_cook::{Keyed, RestoreKey, StageState, WorkerLink, WorkerMessage};
use nix::{
    sys::{
        socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg},
        wait::{Id, WaitPidFlag, WaitStatus, waitid},
    },
    unistd::Pid,
};
use pyo3::{prelude::*, sync::PyOnceLock, types::PyModule};

use crate::{
    encoder::WorkerBatch,
    errors::to_py_err,
    hooks::{Hooks, Item},
    loader::{Raw, prepare, rank_state, to_python},
};

const RESUMED: u8 = 0;
const ITEM: u8 = 1;
const END: u8 = 2;
const FAILED: u8 = 3;
const HEADER: usize = 40;

/// A frame's fixed part: `[kind, has_fd, has_state, 0 x 5, n, key_len, state_len, data_len]`.
struct Header {
    kind: u8,
    has_fd: bool,
    has_state: bool,
    n: u64,
    key_len: u64,
    state_len: u64,
    data_len: u64,
}

impl Header {
    fn to_bytes(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0] = self.kind;
        b[1] = u8::from(self.has_fd);
        b[2] = u8::from(self.has_state);
        for (i, v) in [self.n, self.key_len, self.state_len, self.data_len].into_iter().enumerate()
        {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    fn from_bytes(b: &[u8; HEADER]) -> Self {
        let word = |i: usize| {
            u64::from_le_bytes(b[8 + 8 * i..16 + 8 * i].try_into().expect("eight bytes"))
        };
        Header {
            kind: b[0],
            has_fd: b[1] != 0,
            has_state: b[2] != 0,
            n: word(0),
            key_len: word(1),
            state_len: word(2),
            data_len: word(3),
        }
    }
}

/// A frame as read: its header, key, state, pickled data and shared-memory descriptor.
struct Frame {
    header: Header,
    key: Vec<u8>,
    state: Vec<u8>,
    data: Vec<u8>,
    fd: Option<OwnedFd>,
}

/// Writes one frame, the descriptor (if any) with its first bytes.
fn write_frame(
    stream: &mut UnixStream,
    header: &Header,
    parts: &[&[u8]],
    fd: Option<RawFd>,
) -> std::io::Result<()> {
    let head = header.to_bytes();
    let fds = fd.map(|fd| [fd]);
    let cmsgs: Vec<ControlMessage<'_>> =
        fds.as_ref().map(|fds| ControlMessage::ScmRights(fds)).into_iter().collect();
    let iov = [IoSlice::new(&head)];
    let mut sent = loop {
        match sendmsg::<()>(stream.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), None) {
            Err(nix::errno::Errno::EINTR) => {}
            res => break res.map_err(std::io::Error::from)?,
        }
    };
    if sent < HEADER {
        stream.write_all(&head[sent..])?;
        sent = HEADER;
    }
    debug_assert_eq!(sent, HEADER);
    for part in parts {
        stream.write_all(part)?;
    }
    Ok(())
}

/// Reads one frame; `None` at the end of the stream (before a frame starts).
fn read_frame(stream: &mut UnixStream) -> std::io::Result<Option<Frame>> {
    let mut head = [0u8; HEADER];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let (got, fd) = loop {
        let mut iov = [IoSliceMut::new(&mut head)];
        match recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Err(nix::errno::Errno::EINTR) => {}
            Err(err) => return Err(err.into()),
            Ok(msg) => {
                let mut fd = None;
                for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
                    if let ControlMessageOwned::ScmRights(fds) = cmsg {
                        for raw in fds {
                            // SAFETY: the kernel just installed this descriptor for us.
                            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                            fd.get_or_insert(owned);
                        }
                    }
                }
                break (msg.bytes, fd);
            }
        }
    };
    if got == 0 {
        return Ok(None);
    }
    stream.read_exact(&mut head[got..])?;
    let header = Header::from_bytes(&head);
    let mut read = |len: u64| -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
        stream.read_exact(&mut buf)?;
        Ok(buf)
    };
    let key = read(header.key_len)?;
    let state = read(header.state_len)?;
    let data = read(header.data_len)?;
    Ok(Some(Frame { header, key, state, data, fd }))
}

fn encode<T: serde::Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("restore keys and stage states serialize")
}

/// The Python side of the transport (`energon_rs.workers`): `dumps(obj) -> (bytes, fd)`,
/// `loads(bytes, fd)`, `dump_error(exc) -> bytes`, `load_error(bytes, worker, pid)`.
/// The module is looked up once per process, not once per item.
fn transport<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module =
        MODULE.get_or_try_init(py, || Ok::<_, PyErr>(py.import("energon_rs.workers")?.unbind()))?;
    module.bind(py).getattr(name)
}

/// A worker process's end: converts and sends its pipeline's messages, waiting for the main
/// process's acknowledgements to keep at most `prefetch` frames unread.
struct Outbox {
    stream: UnixStream,
    hooks: Arc<Hooks>,
    prefetch: u64,
    in_flight: u64,
}

impl Outbox {
    /// Sends `message`; `false` when the main process is gone (or the frame cannot be sent).
    fn send(&mut self, message: WorkerMessage<Raw>) -> bool {
        while self.in_flight >= self.prefetch {
            let mut acks = [0u8; 64];
            match self.stream.read(&mut acks) {
                Ok(0) | Err(_) => return false,
                Ok(n) => self.in_flight = self.in_flight.saturating_sub(n as u64),
            }
        }
        let res = match message {
            WorkerMessage::Resumed(n) => self.frame(RESUMED, n, None, None, Vec::new(), None),
            WorkerMessage::End(state) => self.frame(END, 0, None, state, Vec::new(), None),
            WorkerMessage::Item(raw, state) => self.item(raw, state),
            WorkerMessage::Failed(err) => {
                let data = Python::attach(|py| {
                    let exc = self.hooks.take_failure().unwrap_or_else(|| to_py_err(&err));
                    error_bytes(py, exc)
                });
                self.frame(FAILED, 0, None, None, data, None)
            }
        };
        self.in_flight += 1;
        res.is_ok()
    }

    fn item(&mut self, raw: Raw, state: Option<StageState>) -> std::io::Result<()> {
        let key = match &raw {
            Raw::Sample(k) => k.restore_key.clone(),
            Raw::Batch(k) => k.restore_key.clone(),
        };
        let packed = Python::attach(|py| -> PyResult<(Vec<u8>, Option<OwnedFd>)> {
            let obj = to_python(py, prepare(Ok(raw)), std::slice::from_ref(&self.hooks))?
                .expect("an item is not the end of a pass");
            let (data, fd): (Vec<u8>, i64) = transport(py, "dumps")?.call1((obj,))?.extract()?;
            // SAFETY: `dumps` hands the descriptor over to us.
            let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
            Ok((data, fd))
        });
        match packed {
            Ok((data, fd)) => self.frame(ITEM, 0, Some(&key), state, data, fd),
            Err(err) => {
                let data = Python::attach(|py| error_bytes(py, err));
                self.frame(FAILED, 0, None, None, data, None)
            }
        }
    }

    fn frame(
        &mut self,
        kind: u8,
        n: u64,
        key: Option<&RestoreKey>,
        state: Option<StageState>,
        data: Vec<u8>,
        fd: Option<OwnedFd>,
    ) -> std::io::Result<()> {
        let key = key.map(encode).unwrap_or_default();
        let state_bytes = state.as_ref().map(encode).unwrap_or_default();
        let header = Header {
            kind,
            has_fd: fd.is_some(),
            has_state: state.is_some(),
            n,
            key_len: key.len() as u64,
            state_len: state_bytes.len() as u64,
            data_len: data.len() as u64,
        };
        let raw_fd = fd.as_ref().map(AsRawFd::as_raw_fd);
        write_frame(&mut self.stream, &header, &[&key, &state_bytes, &data], raw_fd)
        // `fd` closes here: the main process holds its own copy.
    }
}

/// The pickled exception of a failed item (the Python side falls back to its text).
fn error_bytes(py: Python<'_>, err: PyErr) -> Vec<u8> {
    let exc = err.into_value(py);
    transport(py, "dump_error")
        .and_then(|f| f.call1((exc,)))
        .and_then(|b| b.extract::<Vec<u8>>())
        .unwrap_or_default()
}

/// Serves local worker `worker` of `spec`'s loader on socket `fd` (a worker process's main
/// call): restored from `restore` (a rank's checkpoint bytes) if given, with at most `prefetch`
/// frames unread. Returns when the pipeline fails or the main process is gone.
#[pyfunction]
#[pyo3(signature = (spec, worker, fd, *, prefetch = 2, restore = None))]
pub(crate) fn serve_worker(
    py: Python<'_>,
    spec: &Bound<'_, PyAny>,
    worker: usize,
    fd: RawFd,
    prefetch: u64,
    restore: Option<&[u8]>,
) -> PyResult<()> {
    // The kernel ends this process with its main process, whatever way that one ends.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let source = crate::loader::source_of(spec)?;
    let hooks = source.all_hooks().swap_remove(0);
    let restore = restore.map(|b| rank_state(b, source.worker_config().rank())).transpose()?;
    let stream = dup_stream(fd)?;
    let mut outbox = Outbox { stream, hooks, prefetch: prefetch.max(1), in_flight: 0 };
    py.detach(|| source.serve(worker, restore, &mut |m| outbox.send(m))).map_err(|e| to_py_err(&e))
}

/// A duplicate of the socket `fd` that a Python socket object owns (which stays open and the
/// caller's: shutting it down ends this duplicate's reads too).
fn dup_stream(fd: RawFd) -> PyResult<UnixStream> {
    // SAFETY: `fd` is the descriptor of a socket the caller keeps open during this call.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let owned = nix::unistd::dup(borrowed).map_err(|e| to_py_err(&std::io::Error::from(e)))?;
    Ok(UnixStream::from(owned))
}

/// The main process's end of one worker process's socket, as energon-cook's `WorkerLink` of
/// items `T` (a sample or a batch, as Python objects).
pub(crate) struct ProcessLink<T> {
    stream: UnixStream,
    worker: usize,
    pid: i32,
    hooks: Arc<Hooks>,
    wrap: fn(Py<PyAny>) -> T,
    done: bool,
    waiting: Waiting,
}

/// The worker whose message the loader waits for now (-1: none), for the watchdog's report.
pub(crate) type Waiting = Arc<std::sync::atomic::AtomicI64>;

/// A worker process as the main process knows it: its socket and process id.
pub(crate) struct ProcessWorker {
    pub(crate) stream: UnixStream,
    pub(crate) pid: i32,
    waiting: Waiting,
}

impl ProcessWorker {
    /// The worker of socket `fd` (duplicated: the Python socket object stays the caller's, and
    /// shutting it down ends this link's reads) and process `pid`.
    pub(crate) fn new(fd: RawFd, pid: i32, waiting: &Waiting) -> PyResult<Self> {
        Ok(ProcessWorker { stream: dup_stream(fd)?, pid, waiting: Arc::clone(waiting) })
    }

    /// The link of local worker `worker`, whose items become `T`s.
    pub(crate) fn link<T: Send + 'static>(
        self,
        worker: usize,
        hooks: &Arc<Hooks>,
        wrap: fn(Py<PyAny>) -> T,
    ) -> Box<dyn WorkerLink<Keyed<T>>> {
        Box::new(ProcessLink {
            stream: self.stream,
            worker,
            pid: self.pid,
            hooks: Arc::clone(hooks),
            wrap,
            done: false,
            waiting: self.waiting,
        })
    }
}

/// A sample a worker process made, as the loader's item.
pub(crate) fn sample_item(obj: Py<PyAny>) -> Item {
    Item::Py(obj)
}

/// A batch a worker process made, as the loader's item.
pub(crate) fn batch_item(obj: Py<PyAny>) -> WorkerBatch {
    WorkerBatch::Py(obj)
}

impl<T: Send> WorkerLink<Keyed<T>> for ProcessLink<T> {
    fn recv(&mut self) -> Option<WorkerMessage<Keyed<T>>> {
        if self.done {
            return None;
        }
        let waiting = &self.waiting;
        waiting.store(self.worker as i64, std::sync::atomic::Ordering::Relaxed);
        let frame = read_frame(&mut self.stream);
        waiting.store(-1, std::sync::atomic::Ordering::Relaxed);
        let message = match frame {
            Ok(Some(frame)) => {
                // Acknowledged at once: the worker may make its next item.
                let _ = self.stream.write_all(&[1]);
                self.message(frame)
            }
            Ok(None) => WorkerMessage::Failed(self.lost(None)),
            Err(err) => WorkerMessage::Failed(self.lost(Some(err))),
        };
        self.done = matches!(message, WorkerMessage::Failed(_));
        Some(message)
    }
}

impl<T> ProcessLink<T> {
    fn message(&self, frame: Frame) -> WorkerMessage<Keyed<T>> {
        let state = match frame.header.has_state.then(|| decode::<StageState>(&frame.state)) {
            None => None,
            Some(Ok(state)) => Some(state),
            Some(Err(err)) => return WorkerMessage::Failed(self.broken(&err)),
        };
        match frame.header.kind {
            RESUMED => WorkerMessage::Resumed(frame.header.n),
            END => WorkerMessage::End(state),
            ITEM => {
                let restore_key = match decode::<RestoreKey>(&frame.key) {
                    Ok(key) => key,
                    Err(err) => return WorkerMessage::Failed(self.broken(&err)),
                };
                let fd = if frame.header.has_fd { frame.fd } else { None };
                let obj = Python::attach(|py| -> PyResult<Py<PyAny>> {
                    let fd = fd.map_or(-1, |fd| i64::from(std::os::fd::IntoRawFd::into_raw_fd(fd)));
                    let loads = transport(py, "loads")?;
                    Ok(loads.call1((pyo3::types::PyBytes::new(py, &frame.data), fd))?.unbind())
                });
                match obj {
                    Ok(obj) => {
                        WorkerMessage::Item(Keyed { restore_key, value: (self.wrap)(obj) }, state)
                    }
                    Err(err) => WorkerMessage::Failed(self.keep(err)),
                }
            }
            FAILED => {
                let err = Python::attach(|py| {
                    let exc = transport(py, "load_error")
                        .and_then(|f| {
                            f.call1((
                                pyo3::types::PyBytes::new(py, &frame.data),
                                self.worker,
                                self.pid,
                            ))
                        })
                        .map(PyErr::from_value);
                    exc.unwrap_or_else(|e| e)
                });
                WorkerMessage::Failed(self.keep(err))
            }
            kind => WorkerMessage::Failed(self.broken(&format!("a frame of unknown kind {kind}"))),
        }
    }

    /// Keeps `err` for the loader to re-raise, and says that the worker failed.
    fn keep(&self, err: PyErr) -> energon_cook::Error {
        let reason = err.to_string();
        self.hooks.keep_failure(err);
        energon_cook::Error::WorkerLost { worker: self.worker, reason }
    }

    fn broken(&self, what: &dyn std::fmt::Display) -> energon_cook::Error {
        energon_cook::Error::WorkerLost {
            worker: self.worker,
            reason: format!("process {} sent a broken frame: {what}", self.pid),
        }
    }

    /// The worker's socket ended (or failed) before its pipeline did: how its process ended.
    fn lost(&self, err: Option<std::io::Error>) -> energon_cook::Error {
        let pid = self.pid;
        let deadline = Instant::now() + Duration::from_secs(2);
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        let ended = loop {
            match waitid(Id::Pid(Pid::from_raw(pid)), flags) {
                Ok(WaitStatus::Exited(_, code)) => {
                    break Some(format!("exited with status {code}"));
                }
                Ok(WaitStatus::Signaled(_, signal, _)) => {
                    break Some(format!("was killed by signal {}", signal.as_str()));
                }
                Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
                _ => break None,
            }
        };
        let reason = match (ended, err) {
            (Some(ended), _) => format!("its process {pid} {ended}"),
            (None, Some(err)) => format!("the socket of its process {pid} failed: {err}"),
            (None, None) => format!("its process {pid} closed its socket"),
        };
        energon_cook::Error::WorkerLost { worker: self.worker, reason }
    }
}

fn decode<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(bytes)
}
