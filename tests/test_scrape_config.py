"""deploy/prometheus/: promtool accepts every generated scrape config, and a real Prometheus
running one scrapes targets written by `trainsignals slurm-targets` with the labels the rules
select on (job, selector labels, node)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from trainsignals.cli.main import main
from trainsignals.generator.deploy.scrape_config import scrape_configs
from trainsignals.generator.loader import load_specs, spec_files
from trainsignals.generator.pipeline import generate_all
from trainsignals.stacks import reaper

from .conftest import JOBS, STACK_GROUP, require_tool

SPECS = load_specs(spec_files(JOBS))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_promtool_accepts_every_generated_scrape_config(spec, tmp_path: Path) -> None:
    files = generate_all([(spec, f"jobs/{spec.name}.yaml")])
    path = tmp_path / "prometheus.yml"
    path.write_text(files[f"deploy/prometheus/{spec.name}.scrape.yaml"])
    result = subprocess.run(
        [require_tool("promtool"), "check", "config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    jobs = yaml.safe_load(path.read_text())["scrape_configs"]
    assert all(job["honor_labels"] for job in jobs)
    assert [job["job_name"] for job in jobs] == [
        f"trainsignals-{spec.name}-training",
        f"trainsignals-{spec.name}-gpu",
        f"trainsignals-{spec.name}-node",  # node_exporter: InfiniBand (generator/signals/fabric.py)
    ]


def query(url: str, expr: str) -> list[dict]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    ) as r:
        return json.load(r)["data"]["result"]


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path, object]]:
    """A real Prometheus whose scrape configs are the generated ones for a local spec."""
    training_port, gpu_port = free_port(), free_port()
    spec = SPECS[0].model_copy(
        update={
            "deploy": SPECS[0].deploy.model_copy(
                update={"training_base_port": training_port, "gpu_exporter_port": gpu_port}
            )
        }
    )
    sd = tmp_path / "sd"
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": scrape_configs(spec, str(sd), refresh_interval="1s"),
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    servers = []
    for exporter_port in (training_port, gpu_port):
        registry = CollectorRegistry()
        Gauge("trainsignals_test_up", "test", registry=registry).set(1)
        servers.append(start_http_server(exporter_port, "127.0.0.1", registry))
    proc = reaper.spawn(  # dies with the test run, however it ends
        [
            require_tool("prometheus"),
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}", sd, spec
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        for server, _thread in servers:
            server.shutdown()
            server.server_close()


@pytest.mark.e2e
@pytest.mark.xdist_group(STACK_GROUP)
def test_prometheus_scrapes_slurm_targets_with_the_rules_labels(prometheus, tmp_path) -> None:
    url, sd, spec = prometheus
    spec_file = tmp_path / f"{spec.name}.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True)))
    result = CliRunner().invoke(
        main,
        ["slurm-targets", "--spec", str(spec_file), "--dir", str(sd), "--ranks-per-node", "1"],
        env={"SLURM_JOB_NODELIST": "127.0.0.1", "SLURM_JOB_ID": "17"},
    )
    assert result.exit_code == 0, result.output
    deadline = time.monotonic() + 30
    series: list[dict] = []
    while time.monotonic() < deadline and len(series) < 2:
        time.sleep(0.5)
        try:
            series = query(url, "up == 1")
        except OSError:
            continue
    labels = sorted((s["metric"] for s in series), key=lambda m: m["job"])
    assert [m["job"] for m in labels] == [spec.scrape_jobs.gpu, spec.scrape_jobs.training]
    for metric in labels:
        assert metric["node"] == "127.0.0.1"
        assert {k: metric[k] for k in spec.selector_labels} == spec.selector_labels
