"""What went wrong with NVML: error counts, remembered "not supported" answers, and logs.

Logging is by transition (a (gpu, method) starts failing with a new code, or recovers), so a
GPU that stays lost logs once, not once per scrape.
"""

from __future__ import annotations

import logging
import threading

from trainsignals.exporters.gpu.backend import UNSUPPORTED_CODES, BackendError

log = logging.getLogger("trainsignals.exporters.gpu")


class ErrorTracker:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # the XID thread records errors too
        self._counts: dict[tuple[str, str, str], int] = {}  # (gpu, function, code) -> n
        self._unsupported: set[tuple[str, str]] = set()  # (gpu, method)
        self._failing: dict[tuple[str, str], str] = {}  # (gpu, method) -> current code

    def is_unsupported(self, gpu: str, method: str) -> bool:
        return (gpu, method) in self._unsupported

    def record(self, gpu: str, method: str, err: BackendError) -> None:
        """Count a failure; remember (and do not count) a model that lacks the function."""
        where = f"GPU {gpu}" if gpu else "NVML"
        with self._lock:
            if err.code in UNSUPPORTED_CODES:
                self._unsupported.add((gpu, method))
                log.info("%s: %s is %s here; not asking again", where, err.function, err.code)
                return
            key = (gpu, err.function, err.code)
            self._counts[key] = self._counts.get(key, 0) + 1
            if self._failing.get((gpu, method)) != err.code:
                self._failing[gpu, method] = err.code
                # nvmlInit failures get one explanatory line from the CLI instead
                level = logging.DEBUG if method == "init" else logging.WARNING
                log.log(level, "%s: %s failed: %s", where, err.function, err)

    def ok(self, gpu: str, method: str) -> None:
        if (gpu, method) in self._failing:  # unlocked read: the common case is a miss
            with self._lock:
                code = self._failing.pop((gpu, method), None)
            if code:
                where = f"GPU {gpu}" if gpu else "NVML"
                log.warning("%s: %s answers again (was %s)", where, method, code)

    def counts(self) -> list[tuple[tuple[str, str, str], int]]:
        with self._lock:
            return sorted(self._counts.items())
