"""Worker processes for `get_loader(..., worker_type="process")`: each local worker's whole
pipeline (reading, decoding, the task encoder's hooks, shuffling, packing, batching) in a process
of its own, so that Python hooks run in parallel.

The main process's Rust loader reads every worker's items from its socket in the round-robin
order of worker threads, with the same restore keys and saved states. An item is pickled with its
arrays (numpy arrays and CPU torch tensors of 16 KiB or more) out of band: they are written once
into an anonymous shared-memory file (a memfd) whose descriptor goes with the item, and the main
process maps it, so the arrays it hands out are views of that memory, never unpickled copies.
Such a segment has no name: it is gone with the last array over it, whatever way the processes
end.

Worker types:

- `"thread"`: worker threads in this process (Python hooks take turns holding the GIL).
- `"process"`: worker processes started the platform's default way (`fork` on Linux).
- `"fork"`, `"spawn"`, `"forkserver"`: worker processes started that way. `spawn` and
  `forkserver` rebuild the dataset in the worker from its arguments, so the task encoder must
  pickle.
- `"main"`: every worker's pipeline in turn, in one thread of this process.
"""

from __future__ import annotations

import faulthandler
import gc
import io
import mmap
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import sys
import traceback
from typing import Any, Optional

from . import _native, av

__all__ = ["WORKER_TYPES", "ProcessWorkers", "dumps", "loads"]

#: The worker types `get_loader` takes.
WORKER_TYPES = ("thread", "process", "fork", "spawn", "forkserver", "main")

#: Arrays smaller than this stay inside the pickle.
_OUT_OF_BAND = 16 * 1024
#: Arrays in a segment start at multiples of this.
_ALIGN = 64


def start_method(worker_type: str) -> Optional[str]:
    """The multiprocessing start method of a worker type (`None`: not worker processes)."""
    if worker_type not in WORKER_TYPES:
        raise ValueError(f"worker_type must be one of {', '.join(map(repr, WORKER_TYPES))}, not {worker_type!r}")
    if worker_type == "process":
        return multiprocessing.get_start_method()
    if worker_type in ("fork", "spawn", "forkserver"):
        return worker_type
    return None


def _rebuild_tensor(data: Any, dtype: str, shape: tuple, order: Optional[tuple] = None) -> Any:
    """A tensor over `data`'s bytes: `shape` in memory order, then its axes put back in `order`
    (the permuted view it was, strides and all)."""
    import torch

    tensor = torch.from_numpy(data).view(getattr(torch, dtype)).reshape(shape)
    return tensor if order is None else tensor.permute(order)


class _Pickler(pickle.Pickler):
    """Pickles CPU torch tensors through numpy, so that their bytes go out of band too."""

    def reducer_override(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is None or type(obj) is not torch.Tensor:
            return NotImplemented
        if obj.device.type != "cpu" or obj.requires_grad or obj.layout != torch.strided:
            return NotImplemented
        if obj.numel() * obj.element_size() < _OUT_OF_BAND:
            return NotImplemented
        dtype = str(obj.dtype).removeprefix("torch.")
        if not obj.is_contiguous():
            # A permuted view of contiguous memory (video clips are `(frames, 3, h, w)` views of
            # frame-major RGB): its memory goes as it is, and the view is made again, so the
            # strides stay and nothing is transposed.
            memory_order = tuple(sorted(range(obj.dim()), key=lambda d: -obj.stride(d)))
            base = obj.permute(memory_order)
            if base.is_contiguous():
                flat = base.reshape(-1).view(torch.uint8).numpy()
                order = tuple(memory_order.index(d) for d in range(obj.dim()))
                return _rebuild_tensor, (flat, dtype, tuple(base.shape), order)
        flat = obj.contiguous().reshape(-1).view(torch.uint8).numpy()
        return _rebuild_tensor, (flat, dtype, tuple(obj.shape))


def dumps(obj: Any) -> tuple[bytes, int]:
    """An item as bytes and the descriptor of the memfd that holds its large arrays (-1: none;
    the caller owns it)."""
    buffers: list[pickle.PickleBuffer] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < _OUT_OF_BAND:
            return True
        buffers.append(buffer)
        return False

    body = io.BytesIO()
    _Pickler(body, protocol=5, buffer_callback=out_of_band).dump(obj)
    spans = []
    size = 0
    for buffer in buffers:
        n = buffer.raw().nbytes
        spans.append((size, n))
        size += -(-n // _ALIGN) * _ALIGN
    head = struct.pack(f"<Q{2 * len(spans)}Q", len(spans), *(v for span in spans for v in span))
    if not buffers:
        return head + body.getvalue(), -1
    fd = os.memfd_create("energon-item", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        # Written, not mapped: one copy into the file's pages, without a page fault per page.
        for (offset, _), buffer in zip(spans, buffers):
            raw = buffer.raw()
            written = 0
            while written < raw.nbytes:
                written += os.pwrite(fd, raw[written:], offset + written)
    except BaseException:
        os.close(fd)
        raise
    return head + body.getvalue(), fd


def loads(data: bytes, fd: int) -> Any:
    """The item of `dumps`'s bytes, its arrays views of the memfd `fd` (which this closes)."""
    (n,) = struct.unpack_from("<Q", data, 0)
    spans = struct.unpack_from(f"<{2 * n}Q", data, 8)
    body = memoryview(data)[8 + 16 * n :]
    if n == 0:
        if fd >= 0:
            os.close(fd)
        return pickle.loads(body)
    try:
        size = max(spans[2 * i] + spans[2 * i + 1] for i in range(n))
        # Private: arrays are writable, and writing to one changes nobody else's.
        segment = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    view = memoryview(segment)
    buffers = [view[spans[2 * i] : spans[2 * i] + spans[2 * i + 1]] for i in range(n)]
    return pickle.loads(body, buffers=buffers)


def dump_error(exc: BaseException) -> bytes:
    """A worker's exception with its cause and traceback, pickled (its text when it does not
    pickle)."""
    text = "".join(traceback.format_exception(exc))
    try:
        data = pickle.dumps((exc, exc.__cause__, text))
        pickle.loads(data)
        return data
    except Exception:
        return pickle.dumps((None, None, text, type(exc).__name__, str(exc)))


def load_error(data: bytes, worker: int, pid: int) -> BaseException:
    """The exception of `dump_error`, noting the worker process that raised it."""
    note = f"raised in energon_rs worker process {worker} (pid {pid}); there:\n"
    try:
        parts = pickle.loads(data)
    except Exception:
        parts = (None, None, "", "an exception", "that could not be read")
    exc, cause, text = parts[:3]
    if exc is None:
        exc = _native.LoaderError(f"worker {worker}: {parts[3]}: {parts[4]}")
    elif cause is not None:
        exc.__cause__ = cause
    exc.add_note(note + text.rstrip())
    return exc


def _serve(
    spec: Any,
    recipe: Optional[tuple],
    worker: int,
    sock: socket.socket,
    prefetch: int,
    restore: Optional[bytes],
    inherited: list[socket.socket],
) -> None:
    """A worker process's body: serves its worker's pipeline until the main process is gone."""
    # Ctrl-C is the main process's to handle: it closes its workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The main process's watchdog asks for the stacks of a worker it waits on too long.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    # The main process's ends of the workers started before this one (a fork copies them): held
    # open here, they would hide the main process's end from those workers.
    for other in inherited:
        other.close()
    av.preload()
    torch = sys.modules.get("torch")
    if torch is not None:
        # torch's thread pool of the parent is not in a forked child (its next parallel region
        # would wait forever), and workers share the cores anyway: one thread, as torch's own
        # DataLoader workers run.
        torch.set_num_threads(1)
    try:
        if spec is None:
            # Made again from its recipe (`Dataset._recipe`): spawned workers share nothing.
            make, argument = recipe
            spec = make(argument)._spec
        _native.serve_worker(spec, worker, sock.fileno(), prefetch=prefetch, restore=restore)
    except BrokenPipeError:
        pass
    finally:
        sock.close()


class ProcessWorkers:
    """The worker processes of one loader: started at once, each with its socket; `close()`
    (also at exit, and when garbage collected) ends them."""

    def __init__(
        self,
        dataset: Any,
        method: str,
        prefetch_factor: int,
        restore: Optional[bytes],
    ) -> None:
        self.processes: list[Any] = []
        self.sockets: list[socket.socket] = []
        self._pid = os.getpid()
        n = max(1, dataset.worker_config.num_workers)
        context = multiprocessing.get_context(method)
        forked = method == "fork"
        # A worker that does not fork makes the dataset again from its recipe.
        recipe = None if forked else dataset._recipe()
        if forked and getattr(dataset, "_config", {}).get("torch"):
            # Tensors come out of the workers, and this process takes them in: importing torch
            # now, before the fork, shares its few hundred MB with the workers instead of each
            # importing its own copy.
            import torch  # noqa: F401
        if forked:
            # The objects of this process move to the collector's permanent generation while
            # the workers fork: a worker's collections then never walk them, which would cost
            # its CPU and copy every page they sit on (hundreds of MB with torch imported). This
            # process gets them back at once (the workers keep their frozen copy).
            gc.freeze()
        try:
            for worker in range(n):
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sockets.append(ours)
                process = context.Process(
                    target=_serve,
                    args=(
                        dataset._spec if forked else None,
                        recipe,
                        worker,
                        theirs,
                        prefetch_factor,
                        restore,
                        list(self.sockets) if forked else [],
                    ),
                    name=f"energon-worker-{worker}",
                    daemon=True,
                )
                process.start()
                theirs.close()
                self.processes.append(process)
        except BaseException:
            self.close()
            raise
        finally:
            if forked:
                gc.unfreeze()

    def links(self) -> list[tuple[int, int]]:
        """Each worker's socket descriptor and process id, for the native loader."""
        return [(s.fileno(), p.pid) for s, p in zip(self.sockets, self.processes)]

    def dump_stacks(self) -> None:
        """Makes every worker process write the stacks of its threads to its standard error,
        after a line naming it."""
        for worker, process in enumerate(self.processes):
            if process.is_alive():
                print(f"energon_rs worker process {worker} (pid {process.pid}):", file=sys.stderr, flush=True)
                try:
                    os.kill(process.pid, signal.SIGUSR1)
                except OSError:
                    pass

    def shutdown(self) -> None:
        """Ends every socket, so that a read waiting on one returns (and the workers stop)."""
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self, timeout: float = 0.5) -> None:
        """Ends the workers: their sockets first (a worker stops at its next message), then the
        processes still running after `timeout` (inside a hook: terminated, then killed)."""
        self.shutdown()
        for process in self.processes:
            process.join(timeout)
            if process.is_alive():
                process.terminate()
                process.join(2.0)
            if process.is_alive():
                process.kill()
                process.join()
        for sock in self.sockets:
            sock.close()
        self.processes = []
        self.sockets = []

    def __del__(self) -> None:
        # A forked copy of this object (in a worker) owns nothing.
        if self.processes and os.getpid() == self._pid:
            self.close()
