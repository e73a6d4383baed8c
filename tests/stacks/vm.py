"""The scale-out engine on 127.0.0.1: vmagent -> VictoriaMetrics <- vmalert -> Alertmanager.

The same generated rule files that Prometheus evaluates run unchanged on vmalert. vmagent
scrapes the targets with the same scrape config Prometheus gets (file_sd, honor_labels) and
remote-writes to a VictoriaMetrics single-node store; vmalert queries that store, writes its
recording rules and alert state back through remote write, and notifies the same Alertmanager
(and webhook receiver) as `Stack`. Everything else (ports, temporary data directories,
Alertmanager, webhook, queries, teardown) is `Stack`'s: `VmStack` only swaps the engine.

Binaries come from the Debian package `victoria-metrics` (`make tools`).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import HOST, SCRAPE_SECONDS, Stack
from trainsignals.stacks.stack import prometheus_config as scrape_and_rules_config

VICTORIA_METRICS = "victoria-metrics"
VMAGENT = "vmagent"
VMALERT = "vmalert"
BINARIES = (VICTORIA_METRICS, VMAGENT, VMALERT)
HEALTH = "/health"  # VictoriaMetrics components answer it with OK once serving


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(
            f"{name} not found: install the Debian package victoria-metrics (`make tools`)"
        )
    return path


def dry_run(rule_file: Path) -> subprocess.CompletedProcess[str]:
    """`vmalert -rule=FILE -dryRun`: parses every expression and template, evaluates nothing."""
    return subprocess.run(
        [binary(VMALERT), f"-rule={rule_file}", "-dryRun", "-loggerLevel=ERROR"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def vmalert_command(
    rule_files: list[Path], port: int, store_url: str, alertmanager_url: str
) -> list[str]:
    """vmalert on 127.0.0.1:`port`: reads and writes back to the store, notifies the
    Alertmanager, evaluates every scrape interval."""
    return [
        binary(VMALERT),
        *(f"-rule={path}" for path in rule_files),
        f"-httpListenAddr={HOST}:{port}",
        f"-datasource.url={store_url}",
        f"-remoteWrite.url={store_url}",
        "-remoteWrite.flushInterval=1s",
        f"-notifier.url={alertmanager_url}",
        f"-evaluationInterval={SCRAPE_SECONDS}s",
        f"-external.url={store_url}",
        "-loggerLevel=WARN",
    ]


@dataclass
class VmStack(Stack):
    """`Stack` with vmagent + VictoriaMetrics + vmalert in place of Prometheus.

    `prometheus_url` / `query()` answer from VictoriaMetrics (its Prometheus-compatible query
    API). With `defer_rules`, vmalert starts on `load_rules()`.
    """

    vmagent_port: int = 0
    vmalert_port: int = 0

    def start(self) -> None:
        for name in BINARIES:
            binary(name)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start_receiver()
        self.prometheus_port = self.prometheus_port or free_port()  # VictoriaMetrics
        self.alertmanager_port = self.alertmanager_port or free_port()
        self.vmagent_port = self.vmagent_port or free_port()
        self.vmalert_port = self.vmalert_port or free_port()
        am_file = self._write_alertmanager_config()
        self._spawn("alertmanager", self._alertmanager_argv(am_file))
        self._spawn(
            "victoria-metrics",
            [
                binary(VICTORIA_METRICS),
                f"-httpListenAddr={HOST}:{self.prometheus_port}",
                f"-storageDataPath={self.workdir / 'vm-data'}",
                "-retentionPeriod=1d",
                # Freshly written samples are visible at once (default: 30 s later) and no
                # query result is served from cache: the rules run on second-old data.
                "-search.latencyOffset=0s",
                "-search.disableCache",
                "-loggerLevel=WARN",
            ],
        )
        self._spawn(
            "vmagent",
            [
                binary(VMAGENT),
                f"-httpListenAddr={HOST}:{self.vmagent_port}",
                f"-promscrape.config={self._write_scrape_config()}",
                "-promscrape.fileSDCheckInterval=1s",
                f"-remoteWrite.url={self.prometheus_url}/api/v1/write",
                f"-remoteWrite.tmpDataPath={self.workdir / 'vmagent-data'}",
                "-remoteWrite.flushInterval=1s",
                "-loggerLevel=WARN",
            ],
        )
        self._wait_ready(self.alertmanager_url, "alertmanager")
        self._wait_ready(self.prometheus_url, "victoria-metrics", HEALTH)
        self._wait_ready(f"http://{HOST}:{self.vmagent_port}", "vmagent", HEALTH)
        if not self.defer_rules:
            self.load_rules()

    def _write_scrape_config(self) -> Path:
        """The scrape part of the config Prometheus gets: vmagent reads the same format."""
        config = yaml.safe_load(scrape_and_rules_config(self.specs, self.targets_dirs, [], ""))
        # vmagent refuses the two keys it has flags for instead: rule evaluation is vmalert's
        # (-evaluationInterval), file_sd polling is -promscrape.fileSDCheckInterval.
        config["global"].pop("evaluation_interval", None)
        for job in config["scrape_configs"]:
            for sd in job.get("file_sd_configs", []):
                sd.pop("refresh_interval", None)
        config = {"global": config["global"], "scrape_configs": config["scrape_configs"]}
        path = self.workdir / "vmagent.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")
        return path

    def load_rules(self) -> None:
        """Start vmalert on the rule files (the counterpart of Prometheus's reload)."""
        self._spawn(
            "vmalert",
            vmalert_command(
                self.rule_files, self.vmalert_port, self.prometheus_url, self.alertmanager_url
            ),
        )
        self._wait_ready(f"http://{HOST}:{self.vmalert_port}", "vmalert", HEALTH)
