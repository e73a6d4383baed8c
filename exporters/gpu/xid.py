"""Counts XID critical errors from NVML events in a background daemon thread.

The thread blocks in backend.wait_xid() with a short timeout so it can stop, and survives
every failure: NVML errors are counted and retried with backoff; "not supported" (no event
support on this driver or board) ends the watch with one log line.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from trainsignals.exporters.gpu.backend import UNKNOWN, UNSUPPORTED_CODES, BackendError, GpuBackend

log = logging.getLogger("trainsignals.exporters.gpu")

MAX_BACKOFF_S = 30.0


class XidWatcher:
    def __init__(
        self,
        backend: GpuBackend,
        on_error: Callable[[BackendError], None],
        poll_s: float = 0.5,
    ) -> None:
        self._backend = backend
        self._on_error = on_error
        self._poll_s = poll_s
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[int, int]] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="trainsignals-xid", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def counts(self) -> dict[tuple[int, int], int]:
        """(gpu index, xid) -> events seen since start."""
        with self._lock:
            return dict(self._counts)

    def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            try:
                events = self._backend.wait_xid(self._poll_s)
            except BackendError as e:
                self._on_error(e)
                if e.code in UNSUPPORTED_CODES:
                    log.info("XID events are not supported here; XID counters stay at 0")
                    return
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            except Exception as e:  # a bug or a ctypes surprise must not end the watch
                self._on_error(BackendError("nvmlEventSetWait_v2", UNKNOWN, repr(e)))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
                continue
            backoff = 1.0
            for ev in events:
                log.warning("GPU %d raised XID %d", ev.index, ev.xid)
                with self._lock:
                    self._counts[ev.index, ev.xid] += 1
