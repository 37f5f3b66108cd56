"""The loader watchdog: reports a loader that waits too long for its next item.

`get_loader(ds, watchdog_timeout_seconds=60)` watches every wait for an item: when one lasts
longer than the timeout (`watchdog_initial_timeout_seconds` for the first item), the watchdog
logs the stacks of all threads of the process (and has each worker process of the loader, named,
write its own to its standard error), once per timeout period; with
`fail_on_timeout=True` it then ends the process (exit status 1), as a stuck job should not hold
its machines. Time spent by the consumer between items does not count.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
from typing import Any, Iterator, Optional

__all__ = ["Watchdog", "WatchdogDataset"]

_log = logging.getLogger("energon_rs")


class Watchdog:
    """Watches the waits of one loader (see the module's documentation)."""

    def __init__(
        self,
        timeout: float,
        initial_timeout: Optional[float] = None,
        fail_on_timeout: bool = False,
    ) -> None:
        if timeout <= 0 or (initial_timeout is not None and initial_timeout <= 0):
            raise ValueError("watchdog timeouts must be positive")
        self.timeout = timeout
        self.initial_timeout = timeout if initial_timeout is None else initial_timeout
        self.fail_on_timeout = fail_on_timeout
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._deadline: Optional[float] = None
        self._first = True
        self._stopped = False
        self._active = 0  # watch() generators not finished
        self._thread: Optional[threading.Thread] = None
        #: The loader's worker processes (`energon_rs.workers.ProcessWorkers`), whose stacks a
        #: timeout reports too.
        self.workers: Any = None
        #: Which worker process the watched loader waits for (`_native._WaitingOn`).
        self.waiting: Any = None

    def watch(self, items: Iterator[Any]) -> Iterator[Any]:
        """`items`, with each wait for the next one watched."""
        with self._lock:
            self._active += 1
        try:
            while True:
                self._arm()
                try:
                    item = next(items)
                except StopIteration:
                    return
                finally:
                    self._disarm()
                yield item
        finally:
            with self._lock:
                self._active -= 1
                self._wake.notify_all()
            self._disarm()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            self._wake.notify_all()

    def _arm(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="energon-watchdog", daemon=True)
                self._thread.start()
            limit = self.initial_timeout if self._first else self.timeout
            self._deadline = time.monotonic() + limit
            self._wake.notify_all()

    def _disarm(self) -> None:
        with self._lock:
            self._first = False
            self._deadline = None

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._stopped and self._deadline is None:
                    if self._active == 0:
                        # Nothing is watched: the thread ends (a later wait starts another).
                        self._thread = None
                        return
                    self._wake.wait()
                if self._stopped:
                    self._thread = None
                    return
                assert self._deadline is not None
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                self._deadline = time.monotonic() + self.timeout
            self._watchdog_trigger()

    def _watchdog_trigger(self) -> None:
        """Called in the watchdog's thread when a wait exceeded its timeout."""
        stacks = []
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            stacks.append(f"Thread {names.get(ident, ident)}:\n" + "".join(traceback.format_stack(frame)))
        _log.error(
            "the loader waited more than %ss for an item; stacks of all threads:\n%s",
            self.timeout,
            "\n".join(stacks),
        )
        if self.workers is not None:
            waiting = None if self.waiting is None else self.waiting.worker
            if waiting is not None:
                pid = self.workers.processes[waiting].pid
                _log.error("the loader waits for an item of worker process %s (pid %s)", waiting, pid)
            # Each worker process writes its own threads' stacks to its standard error.
            self.workers.dump_stacks()
        if self.fail_on_timeout:
            logging.shutdown()
            os._exit(1)


#: The reference's name of the watchdog (a dataset wrapper there; here it watches the loader).
WatchdogDataset = Watchdog
