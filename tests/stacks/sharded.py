"""The sharded topology on 127.0.0.1: N Prometheus shards -> VictoriaMetrics <- vmalert -> AM.

Each shard is a real Prometheus 2.42 with the generated shard config
(generator/deploy/sharding/topology.py: the job's scrape configs kept to its hashmod partition
of the nodes, the edge rules, remote write of recorded series only, 1 s deadline) pointed at
the simulators' file_sd folders. The global VictoriaMetrics single-node store and vmalert (the
global rules) are started as `VmStack` starts them; Alertmanager and the webhook receiver are
`Stack`'s.

Rule files: for `rules/<job>.rules.yaml` the stack reads `rules/<job>.edge.rules.yaml` and
`rules/<job>.global.rules.yaml` next to it (tests/e2e/matrix.py writes them for specs with
`deploy.shards`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.stacks.vm import BINARIES, HEALTH, VICTORIA_METRICS, binary, vmalert_command
from trainsignals.generator.deploy.sharding import shard_config
from trainsignals.generator.output.yaml import dump
from trainsignals.generator.spec.monitoring import DEFAULT_SETTINGS, MonitoringSettings
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import HOST, PROMETHEUS, SCRAPE_SECONDS, Stack


def split_files(rule_file: Path) -> tuple[Path, Path]:
    """(edge, global) rule files generated next to a job's `<job>.rules.yaml`."""
    stem = rule_file.name.removesuffix(".rules.yaml")
    return rule_file.with_name(f"{stem}.edge.rules.yaml"), rule_file.with_name(
        f"{stem}.global.rules.yaml"
    )


@dataclass
class ShardedStack(Stack):
    """`Stack` with `shards` Prometheus shards + VictoriaMetrics + vmalert.

    `prometheus_url` / `query()` answer from VictoriaMetrics (the global store). Alertmanager
    has the meta routes of `monitoring` (the settings the rules were generated with), as in
    production: ShardNotReporting reaches the monitoring team, not the job's.
    """

    shards: int = 2
    shard_ports: list[int] = field(default_factory=list)
    vmalert_port: int = 0
    monitoring: MonitoringSettings = DEFAULT_SETTINGS
    _shard_procs: dict[int, subprocess.Popen] = field(default_factory=dict)

    def start(self) -> None:
        for name in BINARIES:
            binary(name)
        for spec in self.specs:
            if spec.deploy.shards != self.shards:
                raise ValueError(
                    f"{spec.name}: deploy.shards is {spec.deploy.shards}, not {self.shards}"
                )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start_receiver()
        self.prometheus_port = self.prometheus_port or free_port()  # VictoriaMetrics
        self.alertmanager_port = self.alertmanager_port or free_port()
        self.vmalert_port = self.vmalert_port or free_port()
        self.shard_ports = [free_port() for _ in range(self.shards)]
        am_config = self._write_alertmanager_config(self.monitoring)
        self._spawn("alertmanager", self._alertmanager_argv(am_config))
        self._spawn(
            "victoria-metrics",
            [
                binary(VICTORIA_METRICS),
                f"-httpListenAddr={HOST}:{self.prometheus_port}",
                f"-storageDataPath={self.workdir / 'vm-data'}",
                "-retentionPeriod=1d",
                "-search.latencyOffset=0s",  # as VmStack: fresh samples queryable at once
                "-search.disableCache",
                "-loggerLevel=WARN",
            ],
        )
        self._wait_ready(self.prometheus_url, "victoria-metrics", HEALTH)
        for shard in range(self.shards):
            self._start_shard(shard)
        self._wait_ready(self.alertmanager_url, "alertmanager")
        for port in self.shard_ports:
            self._wait_ready(f"http://{HOST}:{port}", "prometheus")
        if not self.defer_rules:
            self.load_rules()

    def _shard_file(self, shard: int) -> Path:
        am = f"{HOST}:{self.alertmanager_port}"
        configs = [
            shard_config(
                spec,
                shard,
                str(split_files(rules)[0]),
                directory=str(folder),
                refresh_interval="1s",
                scrape_interval=f"{SCRAPE_SECONDS}s",
                evaluation_interval=f"{SCRAPE_SECONDS}s",
                batch_send_deadline="1s",
                alertmanagers={"static_configs": [{"targets": [am]}]},
            )
            for spec, folder, rules in zip(
                self.specs, self.targets_dirs, self.rule_files, strict=True
            )
        ]
        config = {
            "global": {**configs[0]["global"], "scrape_timeout": f"{SCRAPE_SECONDS}s"},
            "rule_files": [path for c in configs for path in c["rule_files"]],
            "scrape_configs": [job for c in configs for job in c["scrape_configs"]],
            "alerting": configs[0]["alerting"],
            "remote_write": [
                {**configs[0]["remote_write"][0], "url": f"{self.prometheus_url}/api/v1/write"}
            ],
        }
        path = self.workdir / f"shard-{shard}.yml"
        path.write_text(dump(config), encoding="utf-8")
        return path

    def _start_shard(self, shard: int) -> None:
        argv = [
            PROMETHEUS,
            f"--config.file={self._shard_file(shard)}",
            f"--storage.tsdb.path={self.workdir / f'shard-{shard}-data'}",
            f"--web.listen-address={HOST}:{self.shard_ports[shard]}",
        ]
        self._spawn(f"shard-{shard}", argv)
        self._shard_procs[shard] = self._procs[-1]

    def kill_shard(self, shard: int) -> None:
        """SIGKILL one shard: no flush, no staleness markers, as a crashed host."""
        os.kill(self._shard_procs[shard].pid, signal.SIGKILL)
        self._shard_procs[shard].wait(timeout=10)

    def wait_for_targets(self, count: int, timeout: float = 30.0) -> None:
        """Until the shards together have scraped `count` targets successfully."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            up = sum(self._shard_up(port) for port in self.shard_ports)
            if up >= count:
                return
            time.sleep(0.2)
        raise TimeoutError(f"fewer than {count} targets up on the shards after {timeout:g} s")

    def _shard_up(self, port: int) -> int:
        query = urllib.parse.urlencode({"query": "count(up == 1)"})
        with urllib.request.urlopen(f"http://{HOST}:{port}/api/v1/query?{query}", timeout=5) as r:
            result = json.load(r)["data"]["result"]
        return int(float(result[0]["value"][1])) if result else 0

    def load_rules(self) -> None:
        """Start vmalert on the global rule files."""
        global_rules = [split_files(path)[1] for path in self.rule_files]
        command = vmalert_command(
            global_rules, self.vmalert_port, self.prometheus_url, self.alertmanager_url
        )
        # Prometheus adds no `alertgroup` label: the notifications' labels stay equal.
        self._spawn("vmalert", [*command, "-disableAlertgroupLabel"])
        self._wait_ready(f"http://{HOST}:{self.vmalert_port}", "vmalert", HEALTH)

    def _exited(self, name: str) -> bool:
        killed = {p.pid for p in self._shard_procs.values() if p.returncode is not None}
        return any(p.poll() is not None and p.pid not in killed for p in self._procs)
