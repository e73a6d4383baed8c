"""Clean teardown: killing a test run leaves no Prometheus, Alertmanager, simulator or exporter.

Each case starts a real run of tests/teardown_victim.py (Prometheus, Alertmanager, the
simulator and the GPU exporter as processes) in a session of its own, as a terminal or CI
would; once Prometheus scrapes the simulator, it kills the run the way a person or CI does and
asserts that within STOP_SECONDS no process of that session is left and no port it served
still accepts connections. `make test` is the real target, narrowed by PYTEST_ARGS.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_tool

READY_SECONDS = 90  # the victim's stack up and scraping (pytest start, xdist workers, ruff)
# `timed`: STOP_SECONDS is a time bound, and the victim inherits this worker's priority.
pytestmark = pytest.mark.timed
STOP_SECONDS = 20  # from the signal until nothing of the session is left
VICTIM = "tests/teardown_victim.py"


# Runs in-process the simulator CLI, which installs its own SIGTERM handler.
IN_PROCESS_CLI = "tests/test_simulator_http.py::test_cli_runs_a_short_scenario_and_writes_targets"


def _pytest(before: list[str], basetemp: Path) -> list[str]:
    args = ["-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}", *before, VICTIM]
    return [sys.executable, "-m", "pytest", *args]


def _as_from_a_terminal() -> None:
    """Ctrl-C as a user's terminal delivers it: a suite started in the background of a
    non-interactive shell (`make test &`) inherits SIGINT ignored, and so would the victim."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _make_test(basetemp: Path) -> list[str]:
    args = f"-p no:cacheprovider --basetemp={basetemp} {VICTIM}"
    return ["make", "--no-print-directory", "test", f"PYTEST_ARGS={args}"]


# case: (command, how it is killed). "group" sends to the process group, as Ctrl-C does;
# "after-cli": a test before the victim left its own SIGTERM handler installed.
CASES = {
    "pytest-sigterm": ("pytest", signal.SIGTERM, "leader"),
    "pytest-sigkill": ("pytest", signal.SIGKILL, "leader"),
    "pytest-sigterm-after-cli": ("pytest-after-cli", signal.SIGTERM, "leader"),
    "make-test-sigterm": ("make", signal.SIGTERM, "leader"),
    "make-test-ctrl-c": ("make", signal.SIGINT, "group"),
}


def session_processes(sid: int) -> dict[int, str]:
    """Live (not zombie) processes of session `sid`: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError):  # ended meanwhile
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found[int(entry.name)] = cmdline.strip()[:160]
    return found


def accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_ready(proc: subprocess.Popen, ready: Path, log: Path) -> dict:
    deadline = time.monotonic() + READY_SECONDS
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:]
            pytest.fail(f"victim run never got its stack up (rc={proc.poll()}):\n{tail}")
        time.sleep(0.2)
    return json.loads(ready.read_text())


@pytest.mark.parametrize("case", list(CASES))
def test_killed_run_leaves_nothing_behind(case: str, tmp_path: Path) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    runner, sig, target = CASES[case]
    if runner == "make":
        require_tool("make")
        if not (ROOT / ".venv" / "bin" / "pytest").exists():
            pytest.fail("make test needs the project's .venv: run `make setup`")
    ready = tmp_path / "ready.json"
    log = tmp_path / "run.log"
    basetemp = tmp_path / "victim"
    if runner == "make":
        argv = _make_test(basetemp)
    else:
        argv = _pytest([IN_PROCESS_CLI] if runner == "pytest-after-cli" else [], basetemp)
    env = {**os.environ, "TRAINSIGNALS_VICTIM_READY": str(ready)}
    for name in [n for n in env if n.startswith(("PYTEST_XDIST_", "PYTEST_CURRENT_TEST"))]:
        del env[name]  # the victim is a run of its own, not one of our workers
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_as_from_a_terminal,
        )
    sid = proc.pid  # leader of its own session and process group
    try:
        info = _wait_ready(proc, ready, log)
        started = session_processes(sid)
        # The test can fail: everything it watches is running and serving before the kill.
        assert set(info["pids"]) <= set(started), (info, started)
        assert all(accepts(port) for port in info["ports"]), info
        assert len(started) >= 5, started  # runner, Prometheus, Alertmanager, sim, exporter

        if target == "group":
            os.killpg(sid, sig)
        else:
            os.kill(sid, sig)
        killed_at = time.monotonic()
        left = session_processes(sid)
        while left and time.monotonic() - killed_at < STOP_SECONDS:
            time.sleep(0.2)
            left = session_processes(sid)
        took = time.monotonic() - killed_at
        assert left == {}, f"{case}: still running {took:.0f} s after the signal: {left}"
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
        assert proc.returncode is not None
        serving = [port for port in info["ports"] if accepts(port)]
        assert serving == [], f"{case}: ports still accept connections: {serving}"
        print(f"{case}: {len(started)} processes gone {took:.1f} s after {sig.name}")
    finally:  # never leave the victim's processes to the next test, pass or fail
        for pid in session_processes(sid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
