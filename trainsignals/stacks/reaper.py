"""Child processes that never outlive their parent: Prometheus, Alertmanager, simulators, exporters.

A `finally` only runs when Python unwinds; SIGTERM's default action ends the process without
unwinding and SIGKILL cannot be caught. Three layers, each enough on its own for one case:

- `spawn` starts the child with a parent-death signal (Linux `PR_SET_PDEATHSIG`, via
  util-linux `setpriv`, else a `prctl` call between fork and exec): the kernel sends it SIGTERM
  when the process that started it dies, however it dies (SIGKILL included);
- `raise_on_sigterm` turns the first SIGTERM into KeyboardInterrupt, which pytest and every
  `with`/`finally` unwind like Ctrl-C, so the normal stop (and temp-dir removal) runs;
- `stop_all` (also registered with atexit) stops every child `spawn` started and `release`
  did not retire.

Caveat: the kernel ties the parent-death signal to the *thread* that forked. A child spawned
from a thread that exits before the child should end would be killed early, so `spawn` only
sets it from the main thread; children of other threads rely on the other two layers.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_TIMEOUT = 10.0

_live: list[subprocess.Popen] = []
_lock = threading.Lock()
_libc: Any = None


def _prctl() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc.prctl


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent dies; False off Linux.

    If the parent is already gone (we were re-parented before the call), send it now.
    """
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    if _prctl()(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != parent:  # the parent died between getppid and prctl
        os.kill(os.getpid(), sig)
    return True


def _death_signal_argv(argv: Sequence[str]) -> tuple[list[str], Any]:
    """argv and preexec_fn that give the child SIGTERM when this thread's process dies."""
    if not sys.platform.startswith("linux"):
        return list(argv), None
    if threading.current_thread() is not threading.main_thread():
        return list(argv), None
    setpriv = shutil.which("setpriv")  # util-linux: prctl, then exec, no Python after fork
    if setpriv:
        return [setpriv, "--pdeathsig", "TERM", "--", *argv], None
    prctl = _prctl()  # resolved before fork: the child only makes one C call
    return list(argv), lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def _wait_for_exec(proc: subprocess.Popen, wrapper: str, timeout: float = 2.0) -> None:
    """Until the wrapper has set the death signal and exec'd the real program.

    Popen returns once setpriv runs, before its prctl: a parent killed in between would
    leave the child without the signal (tests/test_reaper.py caught exactly that).
    """
    wrapper = os.path.realpath(wrapper)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{proc.pid}/exe") != wrapper:
                return
        except OSError:  # exited, or /proc not readable: nothing to wait for
            return
        time.sleep(0.001)


def spawn(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen:
    """`subprocess.Popen(argv, ...)` for a child that must not outlive this process."""
    full_argv, preexec = _death_signal_argv(argv)
    if preexec is not None:
        popen_kwargs["preexec_fn"] = preexec
    proc = subprocess.Popen(full_argv, **popen_kwargs)
    if full_argv[0] != argv[0]:
        _wait_for_exec(proc, full_argv[0])
    with _lock:  # forget children that ended (their owner waited for them)
        _live[:] = [p for p in _live if p.poll() is None]
        _live.append(proc)
    return proc


def release(proc: subprocess.Popen) -> None:
    """Forget a child its owner has stopped (or means to keep)."""
    with _lock:
        if proc in _live:
            _live.remove(proc)


def stop(procs: Sequence[subprocess.Popen], timeout: float = STOP_TIMEOUT) -> None:
    """Terminate, wait up to `timeout`, then kill; each proc is released."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
        release(proc)


def live() -> list[subprocess.Popen]:
    """Children `spawn` started that are neither released nor reaped."""
    with _lock:
        return [p for p in _live if p.poll() is None]


def stop_all() -> None:
    """Stop every child `spawn` started that nobody stopped (session and exit cleanup)."""
    with _lock:
        procs = list(_live)
    stop(procs)


atexit.register(stop_all)

_sigterm_seen = False
_forward = False


def children(pid: int | None = None) -> list[int]:
    """Direct children of `pid` (default: this process), from /proc; [] where there is none."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def _on_sigterm(signum: int, frame: object) -> None:
    global _sigterm_seen
    if _sigterm_seen:  # a second TERM must not break the cleanup the first one started
        return
    _sigterm_seen = True
    if _forward:  # like Ctrl-C reaching the whole process group
        for pid in children():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def raise_on_sigterm(*, forward: bool = False) -> None:
    """From now on the first SIGTERM raises KeyboardInterrupt in the main thread.

    With `forward`, it is first passed on to every direct child, so workers (pytest-xdist)
    unwind at the same time instead of after their controller's shutdown timeout.
    """
    global _forward
    if threading.current_thread() is threading.main_thread():
        _forward = forward
        signal.signal(signal.SIGTERM, _on_sigterm)
