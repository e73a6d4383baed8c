"""A real Prometheus (Debian's 2.42) on 127.0.0.1 for config tests: start it on a generated
configuration, query it, stop it."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port

from .conftest import require_tool


@dataclass
class LivePrometheus:
    port: int
    log: Path

    def query(self, expr: str) -> list[dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": expr}
        )
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)["data"]["result"]

    def rule_groups(self) -> list[dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1/rules"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)["data"]["groups"]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]


@contextmanager
def live_prometheus(config: Path, port: int = 0) -> Iterator[LivePrometheus]:
    """Prometheus on `config` (its data and log next to it) until the block ends."""
    port = port or free_port()
    folder = config.parent
    with open(folder / "prometheus.log", "wb") as log:
        proc = reaper.spawn(
            [
                require_tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield LivePrometheus(port, folder / "prometheus.log")
        finally:
            proc.terminate()
            proc.wait(timeout=10)
