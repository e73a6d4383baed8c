"""A real Alertmanager (Debian's 0.25) on 127.0.0.1 for routing tests: start it on a config,
post alerts to it, read back what it did (inhibited or not, its own metrics)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from trainsignals.stacks import reaper
from trainsignals.stacks.ports import free_port

from .conftest import require_tool


@dataclass
class LiveAlertmanager:
    url: str

    def _call(self, path: str, body: object | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            headers={"Content-Type": "application/json"},
            method="GET" if body is None else "POST",
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            raw = resp.read()
        return json.loads(raw) if raw and path.startswith("/api/") else raw.decode()

    def post(self, *alerts: dict[str, str], annotations: dict[str, str] | None = None) -> None:
        """Firing alerts with these labels (and the same annotations each)."""
        self._call(
            "/api/v2/alerts",
            [{"labels": labels, "annotations": annotations or {}} for labels in alerts],
        )

    def alerts(self) -> list[dict]:
        return self._call("/api/v2/alerts")  # type: ignore[return-value]

    def inhibited(self, alertname: str) -> bool | None:
        """Whether Alertmanager holds `alertname` inhibited; None when it does not know it."""
        for alert in self.alerts():
            if alert["labels"].get("alertname") == alertname:
                return bool(alert["status"]["inhibitedBy"])
        return None

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` on /metrics whose labels include `labels`."""
        total = 0.0
        for line in str(self._call("/metrics")).splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                total += float(line.rsplit(" ", 1)[1])
        return total


@contextmanager
def live_alertmanager(config_text: str, workdir: Path) -> Iterator[LiveAlertmanager]:
    """Alertmanager on a free port with `config_text`; stopped however the test ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "alertmanager.yml"
    config.write_text(config_text, encoding="utf-8")
    port = free_port()
    log = open(workdir / "alertmanager.log", "wb")  # noqa: SIM115 (closed below)
    proc = reaper.spawn(
        [
            require_tool("prometheus-alertmanager"),
            f"--config.file={config}",
            f"--storage.path={workdir / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    am = LiveAlertmanager(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError((workdir / "alertmanager.log").read_text())
            try:
                am._call("/-/ready")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield am
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def wait_until(predicate, timeout: float = 20.0, step: float = 0.2):
    """The first truthy value of `predicate()`, or its last value after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)
