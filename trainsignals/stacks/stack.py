"""Run the real monitoring stack on 127.0.0.1: Prometheus, Alertmanager and a webhook receiver.

Used by the end-to-end tests (tests/e2e/) and by `python -m trainsignals.demo`. Every process
gets free ports and a temporary data directory; `Stack` is a context manager that always stops
what it started (terminate, then kill), also when starting fails.

Time compression: `job_files(spec, time_scale)` generates the rules (and the dashboard) with
every window and `for` divided by `time_scale`; run the Simulation with the same time scale.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from trainsignals.generator.deploy.scrape_config import scrape_configs as generated_scrape_configs
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.pipeline import Options, generate_job, header
from trainsignals.generator.routing.alertmanager import alertmanager_config
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.monitoring import MonitoringSettings
from trainsignals.stacks import reaper
from trainsignals.stacks.ports import HOST, free_port

PROMETHEUS = "/usr/bin/prometheus"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
# Alertmanager timing for tests: notify a second after the first alert, never repeat.
FAST_TIMING: dict[str, dict[str, str]] = {
    key: {"group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"}
    for key in ("default", "page", "ticket")
}
SCRAPE_SECONDS = 1  # scrape and rule evaluation interval
MIN_RANGE_SECONDS = 4  # the shortest window of compressed rules: a few scrapes


def job_files(spec: JobSpec, time_scale: float, min_for_seconds: float = 1) -> dict[str, str]:
    """The job's generated rules and dashboard, windows divided by `time_scale` (alerts' `for`
    at least `min_for_seconds`)."""
    options = Options(
        time_scale=time_scale,
        min_range_seconds=MIN_RANGE_SECONDS,
        min_for_seconds=min_for_seconds,
        with_tests=False,
    )
    return generate_job(spec, f"<e2e {spec.name}>", options)


def parse_time(value: str) -> float:
    """Unix time of an RFC 3339 timestamp as Alertmanager writes it (nanoseconds allowed)."""
    value = value.replace("Z", "+00:00")
    if "." in value:  # datetime takes at most microseconds
        head, rest = value.split(".", 1)
        digits = "".join(c for c in rest if c.isdigit())
        value = f"{head}.{digits[:6]}{rest[len(digits) :]}"
    return datetime.fromisoformat(value).timestamp()


# --- webhook receiver ---------------------------------------------------------------------
@dataclass(frozen=True)
class Notification:
    """One alert inside one webhook notification, with what the receiver answered."""

    path: str  # /<team>/<severity> of the receiver that posted it
    alertname: str
    severity: str
    status: str  # firing | resolved
    labels: dict[str, str]
    starts_at: float  # Unix time the alert started firing (Prometheus)
    arrived: float  # time.monotonic() at arrival
    arrived_wall: float  # time.time() at arrival
    notification: int  # sequence number of the webhook POST this alert came in
    sender: str = ""  # the sending Alertmanager's external URL
    answered: int = 200  # HTTP status the receiver gave the POST
    annotations: dict[str, str] = field(default_factory=dict)  # as rendered at notification
    group_key: str = ""  # Alertmanager's group key: PagerDuty's dedup key, one per incident


class WebhookReceiver:
    """Records every Alertmanager webhook notification; `on_notify` sees each as it arrives.

    POSTs to a path in `failing` are recorded and answered 500, so fault tests can make a
    receiver fail (Alertmanager then retries).
    """

    def __init__(self, on_notify: Callable[[Notification], None] | None = None) -> None:
        self.notifications: list[Notification] = []
        self.failing: set[str] = set()
        self._lock = threading.Lock()
        self._posts = 0
        self._on_notify = on_notify
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status = receiver.record(self.path, json.loads(body or b"{}"))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def record(self, path: str, payload: dict) -> int:
        """Record the POST's alerts; the HTTP status to answer (500 for a failing path)."""
        arrived, arrived_wall = time.monotonic(), time.time()
        with self._lock:
            self._posts += 1
            answered = 500 if path in self.failing else 200
            items = [
                Notification(
                    path=path,
                    alertname=alert["labels"].get("alertname", ""),
                    severity=alert["labels"].get("severity", ""),
                    status=alert.get("status", ""),
                    labels=dict(alert["labels"]),
                    starts_at=parse_time(alert["startsAt"]),
                    arrived=arrived,
                    arrived_wall=arrived_wall,
                    notification=self._posts,
                    sender=payload.get("externalURL", ""),
                    answered=answered,
                    annotations=dict(alert.get("annotations", {})),
                    group_key=payload.get("groupKey", ""),
                )
                for alert in payload.get("alerts", [])
            ]
            self.notifications.extend(items)
        if self._on_notify is not None:
            for item in items:
                self._on_notify(item)
        return answered

    def snapshot(self) -> list[Notification]:
        with self._lock:
            return list(self.notifications)

    def delivered(self, alertname: str, status: str = "firing") -> list[Notification]:
        """Accepted (200) notifications of `alertname` with `status`."""
        return [
            n
            for n in self.snapshot()
            if n.alertname == alertname and n.status == status and n.answered == 200
        ]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- Prometheus and Alertmanager ------------------------------------------------------------
def prometheus_config(
    specs: Sequence[JobSpec], targets_dirs: Sequence[Path], rule_files: Sequence[Path], am: str
) -> str:
    """prometheus.yml: 1 s scrape/eval; each spec's generated scrape configs
    (generator/deploy/scrape_config.py) read the file_sd files of its simulator's targets dir."""
    if len(specs) != len(targets_dirs):
        raise ValueError("give one targets dir per spec (the simulator's --targets-dir)")
    scrape_configs = [
        config
        for spec, folder in zip(specs, targets_dirs, strict=True)
        for config in generated_scrape_configs(spec, str(folder), refresh_interval="1s")
    ]
    config = {
        "global": {
            "scrape_interval": f"{SCRAPE_SECONDS}s",
            "scrape_timeout": f"{SCRAPE_SECONDS}s",
            "evaluation_interval": f"{SCRAPE_SECONDS}s",
        },
        "rule_files": [str(p) for p in rule_files],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [am]}]}]},
        "scrape_configs": scrape_configs,
    }
    return dump(config)


@dataclass
class Stack:
    """Prometheus + Alertmanager + webhook receiver for these specs, in `workdir`.

    `targets_dirs` are the simulators' file_sd directories (they may be written later),
    `rule_files` the time-scaled rules. Use as a context manager.
    """

    workdir: Path
    specs: Sequence[JobSpec]
    targets_dirs: Sequence[Path]
    rule_files: Sequence[Path]
    timing: dict[str, dict[str, str]] | None = field(default_factory=lambda: FAST_TIMING)
    on_notify: Callable[[Notification], None] | None = None
    ready_timeout: float = 30.0
    defer_rules: bool = False  # start without rules; load_rules() once the targets are up
    prometheus_port: int = 0
    alertmanager_port: int = 0
    receiver: WebhookReceiver | None = None
    _procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def prometheus_url(self) -> str:
        return f"http://{HOST}:{self.prometheus_port}"

    @property
    def alertmanager_url(self) -> str:
        return f"http://{HOST}:{self.alertmanager_port}"

    def __enter__(self) -> Stack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start_receiver()
        self.prometheus_port = self.prometheus_port or free_port()
        self.alertmanager_port = self.alertmanager_port or free_port()
        am_file = self._write_alertmanager_config()
        prom_file = self._write_prometheus_config(with_rules=not self.defer_rules)
        self._spawn("alertmanager", self._alertmanager_argv(am_file))
        self._spawn(
            "prometheus",
            [
                PROMETHEUS,
                f"--config.file={prom_file}",
                f"--storage.tsdb.path={self.workdir / 'prom-data'}",
                f"--web.listen-address={HOST}:{self.prometheus_port}",
                "--web.enable-lifecycle",
            ],
        )
        self._wait_ready(self.alertmanager_url, "alertmanager")
        self._wait_ready(self.prometheus_url, "prometheus")

    def _start_receiver(self) -> WebhookReceiver:
        self.receiver = WebhookReceiver(self.on_notify)
        self.receiver.start()
        return self.receiver

    def _write_alertmanager_config(self, monitoring: MonitoringSettings | None = None) -> Path:
        """alertmanager.yml for the specs, every receiver pointed at the webhook receiver."""
        assert self.receiver is not None
        text = alertmanager_config(
            list(self.specs),
            header(self.specs[0], f"<{type(self).__module__}>"),
            local_webhook_base=self.receiver.url,
            timing=self.timing,
            monitoring=monitoring,
        )
        path = self.workdir / "alertmanager.yml"
        path.write_text(text, encoding="utf-8")
        return path

    def _alertmanager_argv(self, am_file: Path) -> list[str]:
        """A single Alertmanager (no cluster) on `alertmanager_port`."""
        return [
            ALERTMANAGER,
            f"--config.file={am_file}",
            f"--storage.path={self.workdir / 'am-data'}",
            f"--web.listen-address={HOST}:{self.alertmanager_port}",
            "--cluster.listen-address=",
        ]

    def _write_prometheus_config(self, *, with_rules: bool) -> Path:
        path = self.workdir / "prometheus.yml"
        rule_files = self.rule_files if with_rules else []
        am = f"{HOST}:{self.alertmanager_port}"
        text = prometheus_config(self.specs, self.targets_dirs, rule_files, am)
        path.write_text(text, encoding="utf-8")
        return path

    def wait_for_targets(self, count: int, timeout: float = 30.0) -> None:
        """Until `count` targets have been scraped successfully (up == 1)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query("count(up == 1)")
            if result and int(float(result[0]["value"][1])) >= count:
                return
            time.sleep(0.2)
        # On compressed time a stack this late says the machine is too busy for the timings.
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        raise TimeoutError(
            f"fewer than {count} targets up after {timeout:g} s (load average {load} on "
            f"{os.cpu_count()} CPUs)"
        )

    def load_rules(self) -> None:
        """Add the rule files to the config and reload Prometheus (its lifecycle API).

        Rules loaded after the first scrapes do not see a job without targets at startup
        (a compressed `for` is shorter than service discovery plus the first scrape).
        """
        self._write_prometheus_config(with_rules=True)
        request = urllib.request.Request(f"{self.prometheus_url}/-/reload", method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            if resp.status != 200:
                raise RuntimeError(f"prometheus reload answered {resp.status}")
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:  # until every rule group is loaded
            with urllib.request.urlopen(f"{self.prometheus_url}/api/v1/rules", timeout=5) as r:
                if len(json.load(r)["data"]["groups"]) >= 2 * len(self.rule_files):
                    return
            time.sleep(0.1)
        raise TimeoutError("prometheus did not load the rule files")

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        # reaper: the process dies with this one, also on SIGTERM/SIGKILL of the test run
        self._procs.append(reaper.spawn(argv, stdout=log, stderr=subprocess.STDOUT))
        log.close()

    def _wait_ready(self, url: str, name: str, path: str = "/-/ready") -> None:
        """Until `url + path` answers 200; fails early once `_exited(name)`."""
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._exited(name):
                raise RuntimeError(f"{name} exited; see {self.workdir / (name + '.log')}")
            try:
                with urllib.request.urlopen(f"{url}{path}", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"{name} not ready at {url} after {self.ready_timeout:g} s")

    def _exited(self, name: str) -> bool:
        """Whether waiting for `name` is futile: here, once any process of the stack exited."""
        return any(p.poll() is not None for p in self._procs)

    def stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._procs.clear()
        if self.receiver is not None:
            self.receiver.stop()
            self.receiver = None

    def query(self, expr: str, timeout: float = 5.0) -> list[dict]:
        """Instant query on Prometheus's HTTP API: the result list (vector/matrix items)."""
        params = urllib.parse.urlencode({"query": expr})
        url = f"{self.prometheus_url}/api/v1/query?{params}"
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.load(resp)
        if body.get("status") != "success":
            raise RuntimeError(f"query {expr!r} failed: {body}")
        result = body["data"]["result"]
        if body["data"]["resultType"] in ("scalar", "string"):
            return [{"value": result}]
        return result
