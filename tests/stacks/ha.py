"""The monitoring pipeline as production runs it, on 127.0.0.1: an Alertmanager cluster.

`HAStack` extends `Stack` (trainsignals/stacks/stack.py) with:
- N Alertmanagers gossiping on loopback (`--cluster.listen-address`, `--cluster.peer`), each
  with its own `--storage.path` (silences and notification log survive a restart) and its own
  `--web.external-url`, so a notification says which member sent it;
- Prometheus sending every alert to all of them (not to one, not through a load balancer: the
  cluster deduplicates), scraping itself and the Alertmanagers for the meta-monitoring rules,
  with the rule-restore flags (`--rules.alert.for-grace-period`, `--rules.alert.resend-delay`)
  scaled like the rules;
- processes that can be killed, stopped and restarted by name; with the receiver's `failing`
  paths (answered 500, trainsignals/stacks/stack.py) the fault tests (tests/chaos/) use those.

Production-like defaults are the real ones divided by the test's time scale; see `flags`.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from trainsignals.generator.meta.files import meta_files
from trainsignals.generator.pipeline import Options
from trainsignals.generator.spec.monitoring import Heartbeat, MonitoringSettings
from trainsignals.generator.spec.receivers import Receiver, Routing
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import ALERTMANAGER, HOST, MIN_RANGE_SECONDS, PROMETHEUS, Stack

PROMETHEUS_JOB, ALERTMANAGER_JOB = "prometheus", "alertmanager"


# --- a target whose gauges the test sets ----------------------------------------------------
class GaugeTarget:
    """A /metrics endpoint serving `name{labels} value` lines the test changes at will."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                text = "".join(f"{k} {v}\n" for k, v in sorted(target.values.items()))
                data = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.address = f"{HOST}:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def monitoring_settings(
    receiver_url: str, replicas: int, heartbeat_seconds: int
) -> MonitoringSettings:
    """Meta-monitoring settings for the stack: the heartbeat goes to the local receiver, and so
    do the monitoring team's page and ticket receivers, as the webhooks they are here. The
    meta rules follow the routing: without receivers no integration carries pages, and
    AlertmanagerNotificationsFailing was not generated at all (`make chaos` waited 90 s for it)."""
    return MonitoringSettings(
        prometheus_job=PROMETHEUS_JOB,
        alertmanager_job=ALERTMANAGER_JOB,
        alertmanager_replicas=replicas,
        heartbeat=Heartbeat(
            url=f"{receiver_url}/deadmansswitch", secret=None, interval=f"{heartbeat_seconds}s"
        ),
        routing=Routing(
            page=Receiver(kind="webhook", target=f"{receiver_url}/monitoring/page"),
            ticket=Receiver(kind="webhook", target=f"{receiver_url}/monitoring/ticket"),
        ),
    )


@dataclass
class HAStack(Stack):
    """Stack with `alertmanagers` clustered Alertmanagers and the meta-monitoring rules.

    `time_scale` divides the meta rules' windows and Prometheus' for-grace-period (10m) as
    `Options.time_scale` does for job rules; `resend_delay` is Prometheus' resend interval:
    a firing alert stays alive in Alertmanager for 4 x that without a resend.
    """

    alertmanagers: int = 2
    time_scale: float = 60.0
    heartbeat_seconds: int = 4
    peer_timeout: str = "2s"  # production 15s: how long member n+1 waits for member n
    resend_delay: str = "3s"  # production 1m
    for_grace_period: str | None = None  # None: production's 10m divided by time_scale
    with_meta: bool = True
    am_ports: list[int] = field(default_factory=list)
    cluster_ports: list[int] = field(default_factory=list)
    settings: MonitoringSettings | None = None
    _argv: dict[str, list[str]] = field(default_factory=dict)
    _named: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def alertmanager_urls(self) -> list[str]:
        return [f"http://{HOST}:{port}" for port in self.am_ports]

    def am_name(self, index: int) -> str:
        return f"alertmanager-{index}"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        receiver = self._start_receiver()
        self.prometheus_port = self.prometheus_port or free_port()
        self.am_ports = [free_port() for _ in range(self.alertmanagers)]
        self.cluster_ports = [free_port() for _ in range(self.alertmanagers)]
        self.alertmanager_port = self.am_ports[0]
        self.settings = monitoring_settings(
            receiver.url, self.alertmanagers, self.heartbeat_seconds
        )
        am_file = self._write_alertmanager_config(self.settings)
        if self.with_meta:
            self.rule_files = [*self.rule_files, self._write_meta_rules()]
        prom_file = self._write_prometheus_config(with_rules=True)
        for i in range(self.alertmanagers):
            self._argv[self.am_name(i)] = self._am_argv(i, am_file)
        self._argv["prometheus"] = [
            PROMETHEUS,
            f"--config.file={prom_file}",
            f"--storage.tsdb.path={self.workdir / 'prom-data'}",
            f"--web.listen-address={HOST}:{self.prometheus_port}",
            "--web.enable-lifecycle",
            *self.flags(),
        ]
        for name in self._argv:
            self.spawn(name)
        for i, url in enumerate(self.alertmanager_urls):
            self._wait_ready(url, self.am_name(i))
        self._wait_ready(self.prometheus_url, "prometheus")
        if self.alertmanagers > 1:
            self.wait_for_cluster()

    def wait_for_cluster(self, members: int | None = None) -> None:
        """Until every running member sees `members` peers and has settled its gossip.

        Members started together may miss each other's first join and run apart (both would
        send every notification) until the next reconnect: production waits for this too,
        and the meta rule AlertmanagerClusterDegraded reports it when it lasts.
        """
        want = members or self.alertmanagers
        deadline = time.monotonic() + self.ready_timeout
        running = [
            i for i in range(self.alertmanagers) if self._named[self.am_name(i)].poll() is None
        ]
        while time.monotonic() < deadline:
            states = []
            for i in running:
                with urllib.request.urlopen(
                    f"{self.alertmanager_urls[i]}/api/v2/status", timeout=5
                ) as resp:
                    cluster = json.load(resp)["cluster"]
                states.append(
                    cluster.get("status") == "ready" and len(cluster.get("peers") or []) == want
                )
            if all(states):
                return
            time.sleep(0.2)
        raise TimeoutError(f"Alertmanager cluster did not reach {want} settled members")

    def flags(self) -> list[str]:
        """Prometheus' rule-restore flags: production's for-grace-period (10m) scaled."""
        grace = self.for_grace_period or f"{max(1, round(600 / self.time_scale))}s"
        return [
            f"--rules.alert.for-grace-period={grace}",
            f"--rules.alert.resend-delay={self.resend_delay}",
        ]

    def _am_argv(self, index: int, config: Path) -> list[str]:
        argv = [
            ALERTMANAGER,
            f"--config.file={config}",
            f"--storage.path={self.workdir / f'am-{index}'}",
            f"--web.listen-address={HOST}:{self.am_ports[index]}",
            f"--web.external-url={self.alertmanager_urls[index]}",
        ]
        if self.alertmanagers == 1:
            return [*argv, "--cluster.listen-address="]
        argv += [
            f"--cluster.listen-address={HOST}:{self.cluster_ports[index]}",
            f"--cluster.advertise-address={HOST}:{self.cluster_ports[index]}",
            f"--cluster.peer-timeout={self.peer_timeout}",
        ]
        return argv + [
            f"--cluster.peer={HOST}:{port}"
            for j, port in enumerate(self.cluster_ports)
            if j != index
        ]

    def _write_meta_rules(self) -> Path:
        options = Options(
            time_scale=self.time_scale, min_range_seconds=MIN_RANGE_SECONDS, with_tests=False
        )
        files = meta_files([(s, "<e2e>") for s in self.specs], options, self.settings)
        path = self.workdir / "meta.rules.yaml"
        path.write_text(files["alerts/meta.rules.yaml"], encoding="utf-8")
        return path

    def _write_prometheus_config(self, *, with_rules: bool) -> Path:
        """The base config, sending to every Alertmanager and scraping the pipeline itself."""
        path = super()._write_prometheus_config(with_rules=with_rules)
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        targets = [f"{HOST}:{port}" for port in self.am_ports]
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": targets}]}]}
        config["scrape_configs"] += [
            {
                "job_name": PROMETHEUS_JOB,
                "static_configs": [{"targets": [f"{HOST}:{self.prometheus_port}"]}],
            },
            {"job_name": ALERTMANAGER_JOB, "static_configs": [{"targets": targets}]},
        ]
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    # --- processes by name ------------------------------------------------------------------
    def spawn(self, name: str) -> None:
        self._spawn(name, self._argv[name])
        self._named[name] = self._procs[-1]

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal a process (SIGKILL: no shutdown work; SIGTERM: clean) and wait for it."""
        proc = self._named[name]
        proc.send_signal(sig)
        proc.wait(timeout=30)

    def restart(self, name: str) -> None:
        """Start a stopped process again with the same flags, ports and data; until ready."""
        self.spawn(name)
        if name == "prometheus":
            self._wait_ready(self.prometheus_url, name)
        else:
            self._wait_ready(self.alertmanager_urls[int(name.rsplit("-", 1)[1])], name)

    def _exited(self, name: str) -> bool:
        # Only the named process matters: others may be stopped on purpose by a fault test.
        proc = self._named.get(name)
        return proc is not None and proc.poll() is not None

    def am_alerts(self, index: int) -> list[dict]:
        """Alerts one Alertmanager holds now (its /api/v2/alerts)."""
        url = f"{self.alertmanager_urls[index]}/api/v2/alerts"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.load(resp)
