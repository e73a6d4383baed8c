"""A small simulation served on 127.0.0.1: scrape one rank and one GPU exporter over HTTP."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from trainsignals.generator.loader import load_specs
from trainsignals.simulator import Simulation
from trainsignals.simulator.cli import simulate

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "jobs" / "minimal.yaml"


def get(address: str) -> dict[str, list]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_serves_one_rank_and_one_gpu_endpoint(tmp_path: Path) -> None:
    spec = load_specs([SPEC])[0]
    sim = Simulation(spec, "healthy", time_scale=60, seed=1, nodes=1, gpus_per_node=2,
                     targets_dir=tmp_path)  # fmt: skip
    try:
        sim.serve()
        sim.advance_to(15 * 60)  # deterministic clock; HTTP only reads
        rank = sim.targets()[1]
        (gpu,) = [t for t in sim.targets() if t.kind == "gpu"]
        (node,) = [t for t in sim.targets() if t.kind == "node"]
        series = get(rank.address)
        (steps,) = series["trainsignals_steps_total"]
        assert steps.value > 0
        assert steps.labels == {
            "node": "minimal-node0", "rank": "1", "local_rank": "1", "training_job": "minimal",
        }  # fmt: skip
        gpus = get(gpu.address)["trainsignals_gpu_up"]
        assert sorted(s.labels["gpu"] for s in gpus) == ["0", "1"]
        assert all(s.labels["training_job"] == "minimal" for s in gpus)

        groups = json.loads((tmp_path / "training.json").read_text())
        assert groups == [
            {
                "labels": {"node": "minimal-node0", "training_job": "minimal"},
                "targets": [t.address for t in sim.targets()[:2]],
            }
        ]
        gpu_groups = json.loads((tmp_path / "gpu.json").read_text())
        assert gpu_groups[0]["targets"] == [gpu.address]
        # node_exporter stand-in: InfiniBand ports, its own target in node.json.
        ib = get(node.address)["node_infiniband_state_id"]
        assert sorted((s.labels["device"], s.value) for s in ib) == [("mlx5_0", 4), ("mlx5_1", 4)]
        node_groups = json.loads((tmp_path / "node.json").read_text())
        assert node_groups[0]["targets"] == [node.address]
    finally:
        sim.stop()


def test_cli_runs_a_short_scenario_and_writes_targets(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        simulate,
        ["--spec", str(SPEC), "--scenario", "crash", "--nodes", "1", "--gpus-per-node", "2",
         "--time-scale", "120", "--duration", "2m", "--targets-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "expect TrainingTargetsDown (page)" in result.output
    assert "http://127.0.0.1:" in result.output
    assert json.loads((tmp_path / "training.json").read_text())[0]["labels"]["node"]


def test_cli_rejects_bad_duration_and_time_scale() -> None:
    runner = CliRunner()
    bad = runner.invoke(simulate, ["--spec", str(SPEC), "--duration", "soon"])
    assert bad.exit_code == 2 and "not a duration" in bad.output
    fast = runner.invoke(simulate, ["--spec", str(SPEC), "--time-scale", "5000"])
    assert fast.exit_code == 1 and "too large" in fast.output
