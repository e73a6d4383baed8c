"""The run that tests/test_teardown.py kills. Not collected by the suite (no `test_` prefix).

It starts what the suite starts: Prometheus and Alertmanager (trainsignals.stacks.stack.Stack), the
simulator and the GPU exporter as processes of their own; writes their pids and ports to
$TRAINSIGNALS_VICTIM_READY once Prometheus scrapes both; then waits to be killed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import JOBS
from trainsignals.generator.loader import load_specs
from trainsignals.simulator.job import effective_spec
from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import Stack

WAIT_SECONDS = 120  # bounded even if nobody kills this run
pytestmark = pytest.mark.timed  # its run's workers unwind at normal priority when killed


def test_stack_until_killed(tmp_path: Path) -> None:
    ready = Path(os.environ["TRAINSIGNALS_VICTIM_READY"])
    spec = effective_spec(load_specs([JOBS / "minimal.yaml"])[0], 1, 1)
    sd = tmp_path / "sd"
    exporter_port = free_port()
    with Stack(tmp_path / "stack", [spec], [sd], []) as stack:
        sim_argv = ["-m", "trainsignals.simulator", "--spec", str(JOBS / "minimal.yaml")]
        sim_argv += ["--scenario", "healthy", "--nodes", "1", "--gpus-per-node", "1"]
        sim_argv += ["--time-scale", "60", "--targets-dir", str(sd)]
        exporter_argv = ["-c", "from trainsignals.exporters.gpu.cli import main; main()"]
        exporter_argv += ["--listen-address", "127.0.0.1", "--port", str(exporter_port)]
        exporter_argv += ["--fake", "1"]
        children = [
            _start(sim_argv, tmp_path / "simulator.log"),
            _start(exporter_argv, tmp_path / "exporter.log"),
        ]
        try:
            stack.wait_for_targets(2, timeout=60)  # the simulator's rank and GPU exporter
            procs = [*stack._procs, *children]
            ports = [stack.prometheus_port, stack.alertmanager_port, exporter_port]
            payload = {"pids": [os.getpid(), *(p.pid for p in procs)], "ports": ports}
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(json.dumps(payload), encoding="utf-8")
            tmp.replace(ready)
            time.sleep(WAIT_SECONDS)
        finally:
            reaper.stop(children)


def _start(python_argv: list[str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log:
        return reaper.spawn([sys.executable, *python_argv], stdout=log, stderr=subprocess.STDOUT)
