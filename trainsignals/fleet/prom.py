"""A Prometheus 2.42 on 127.0.0.1 over a data directory of backfilled blocks.

It scrapes nothing and evaluates no rules: the replay asks it range queries. Its lookback
delta is half the step: samples sit exactly on the evaluation instants, so an instant query
sees the sample of that instant only, and a series that stops (a drained node, a crashed rank)
is gone at the next evaluation, as Prometheus' staleness markers make it go live (OpenMetrics
backfill cannot carry staleness markers).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import HOST, PROMETHEUS

STEP_S = 60


class Prometheus:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> None:
        config = self.data.parent / "prometheus.yml"
        config.write_text(f"global:\n  evaluation_interval: {STEP_S}s\n")
        self.port = free_port()
        log = (self.data.parent / "prometheus.log").open("ab")
        # reaper: Prometheus dies with this process, also on SIGTERM/SIGKILL of a test run
        self.process = reaper.spawn(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data}",
                "--storage.tsdb.retention.time=10y",
                f"--web.listen-address={HOST}:{self.port}",
                f"--query.lookback-delta={STEP_S // 2}s",
                "--query.max-samples=200000000",
                "--query.timeout=10m",
            ],
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited; see {self.data.parent / 'prometheus.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("prometheus did not become ready within 120 s")

    def stop(self) -> None:
        if self.process is None:
            return
        reaper.stop([self.process], timeout=30)
        self.process = None

    def restart_with(self, blocks: Path) -> None:
        """Stop, move freshly written blocks into the data directory, start again."""
        self.stop()
        for block in sorted(blocks.iterdir()) if blocks.is_dir() else []:  # none: nothing recorded
            if block.is_dir():
                shutil.move(str(block), self.data / block.name)
        self.start()

    def range_query(self, expr: str, start: float, end: float, step: int = STEP_S) -> list[dict]:
        """Every series of `expr` at each step from start to end (chunks of 10,000 steps)."""
        merged: dict[str, dict] = {}
        chunk = 10_000 * step
        first = start
        while first <= end:
            last = min(end, first + chunk - step)
            query = urllib.parse.urlencode(
                {"query": expr, "start": first, "end": last, "step": step}
            )
            with urllib.request.urlopen(f"{self.url}/api/v1/query_range?{query}", timeout=900) as r:
                body = json.load(r)
            if body.get("status") != "success":
                raise RuntimeError(f"query failed: {expr}: {body}")
            for series in body["data"]["result"]:
                key = json.dumps(series["metric"], sort_keys=True)
                merged.setdefault(key, {"metric": series["metric"], "values": []})
                merged[key]["values"].extend(series["values"])
            first += chunk
        return list(merged.values())

    def __enter__(self) -> Prometheus:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
