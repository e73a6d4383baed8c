"""A 2-node Slurm job end to end: `trainsignals slurm-targets`' file_sd files, a real Prometheus
and Alertmanager with the job's and the meta rules, a healthy simulated run.

Before issue 27 slurm-targets wrote only training and GPU targets; the scrape config also reads
`node*.json` (node_exporter, for the InfiniBand alerts), so every multi-node Slurm job paged
ScrapeTargetsVanished{vanished="node"} after 10 minutes. Here: nothing pages while healthy;
stopping one node_exporter is one NodeExporterDown ticket naming its node (README, InfiniBand).

The nodes are 127.0.0.1 and 127.0.0.2 (both loopback), each answering on the ports the spec and
slurm-targets name; what they answer is the simulator's endpoints (its node names rewritten to
the hosts, as a real node's exporters would name themselves).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.chaos.conftest import wait_until
from tests.conftest import TOPOLOGY_GROUP, require_tool
from tests.stacks.ha import HAStack
from trainsignals.cli.main import main
from trainsignals.generator.spec.job import JobSpec
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.simulator.targets import Target
from trainsignals.stacks.ports import free_port
from trainsignals.stacks.stack import FAST_TIMING, job_files

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(TOPOLOGY_GROUP)]

HOSTS = ("127.0.0.1", "127.0.0.2")
SCALE = 120.0  # ScrapeTargetsVanished's and NodeExporterDown's 10m `for`: 5 s
HEALTHY_S = 12.0


class FakeHost:
    """One of `endpoints` of the simulation, served at host:port as slurm-targets named it."""

    def __init__(self, sim: Simulation, target: Target, host: str, port: int) -> None:
        def answer() -> bytes | None:
            text = sim.endpoints.scrape(target)
            return None if text is None else text.replace(target.node, host).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = answer()
                if body is None:
                    self.send_response(503)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _spec(tmp_path: Path, ports: dict[str, int]) -> Path:
    path = tmp_path / "jobs" / "slurm-e2e.yaml"
    path.parent.mkdir()
    path.write_text(
        yaml.safe_dump(
            {
                "name": "slurm-e2e",
                "team": "ml",
                "shape": {
                    "nodes": 2,
                    "gpus_per_node": 1,
                    "gpu_model": "H100-SXM",
                    "model_flops_per_token": 4.2e10,
                },
                "deploy": {
                    "training_base_port": ports["training"],
                    "gpu_exporter_port": ports["gpu"],
                },
                "routing": {
                    "page": {"kind": "webhook", "target": "https://pager.corp.test/ml"},
                    "ticket": {"kind": "webhook", "target": "https://tickets.corp.test/ml"},
                },
            }
        )
    )
    return path


def test_two_node_slurm_job_is_quiet_and_a_stopped_node_exporter_tickets(tmp_path: Path) -> None:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    ports = {kind: free_port() for kind in ("training", "gpu", "node")}
    spec_path = _spec(tmp_path, ports)
    sd = tmp_path / "sd"
    written = CliRunner().invoke(
        main,
        [
            "slurm-targets",
            "--spec",
            str(spec_path),
            "--dir",
            str(sd),
            "--node-exporter-port",
            str(ports["node"]),
        ],
        env={"SLURM_JOB_NODELIST": "127.0.0.[1-2]", "SLURM_JOB_ID": "77"},
    )
    assert written.exit_code == 0, written.output
    assert sorted(p.name for p in sd.iterdir()) == [
        "gpu-77.json",
        "node-77.json",
        "training-77.json",
    ]

    spec = effective_spec(JobSpec.model_validate(yaml.safe_load(spec_path.read_text())), 2, 1)
    sim = Simulation(spec, "healthy", time_scale=SCALE, nodes=2, gpus_per_node=1)
    by_kind = {
        "training": [r.target for r in sim.ranks],
        "gpu": [n.target for n in sim.nodes],
        "node": [n.fabric_target for n in sim.nodes],
    }
    hosts: dict[tuple[str, str], FakeHost] = {}
    rules = tmp_path / "slurm-e2e.rules.yaml"
    rules.write_text(job_files(spec, SCALE)["alerts/slurm-e2e.rules.yaml"])
    stack = HAStack(
        tmp_path / "stack",
        [spec],
        [sd],
        [rules],
        {k: dict(v) for k, v in FAST_TIMING.items()},
        alertmanagers=1,
        time_scale=SCALE,
    )
    try:
        for kind, targets in by_kind.items():
            groups = json.loads((sd / f"{kind}-77.json").read_text())
            assert [g["labels"]["node"] for g in groups] == list(HOSTS)
            for group, target in zip(groups, targets, strict=True):
                host, port = group["targets"][0].rsplit(":", 1)
                assert target is not None
                hosts[(kind, host)] = FakeHost(sim, target, host, int(port))
        sim.start(3600)
        with stack:
            stack.wait_for_targets(6 + 2)  # 2 ranks, 2 GPU exporters, 2 node_exporters, self
            receiver = stack.receiver
            assert receiver is not None
            time.sleep(HEALTHY_S)
            firing = [
                r["metric"]["alertname"]
                for r in stack.query('ALERTS{alertstate="firing",alertname!="Watchdog"}')
            ]
            noticed = [n for n in receiver.snapshot() if n.alertname != "Watchdog"]
            assert firing == [] and noticed == [], (firing, noticed)

            stopped = time.monotonic()
            hosts[("node", HOSTS[1])].stop()
            ticket = wait_until(
                lambda: receiver.delivered("NodeExporterDown"), 30, "NodeExporterDown"
            )[0]
            delay = time.monotonic() - stopped
            assert ticket.severity == "ticket" and ticket.labels["node"] == HOSTS[1], ticket
            others = {n.alertname for n in receiver.snapshot()} - {"Watchdog", "NodeExporterDown"}
            assert others == set(), others
            pages = [n for n in receiver.snapshot() if n.severity == "page"]
            assert pages == [], pages
            print(f"\nNodeExporterDown {delay:.1f} s after the stop (x{SCALE:g}: 10m for)")
    finally:
        sim.stop()
        for host in hosts.values():
            if host.server.socket.fileno() != -1:
                host.stop()
