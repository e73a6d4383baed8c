"""Goodput on real Prometheus: the simulator's restart, backfilled, against its ground truth.

The simulator runs the `restart` scenario (crash, 4m down, start-up, checkpoint restore, lost
steps redone) on a deterministic clock at time scale 60; every 0.25 s of real time its ranks'
expositions become OpenMetrics samples, which `promtool tsdb create-blocks-from openmetrics`
writes into the data directory of a real Prometheus (trainsignals.stacks.stack). The data ends just
before Prometheus starts, so the generated recording rules (same scale) evaluate on its last
simulated hour live.

Checked: `trainsignals goodput` over a range matches the simulator's own ground truth within
1 percentage point per category; the recorded 1h ratios add up to 1 and equal the command's
numbers over the same window.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import JOBS, TOPOLOGY_GROUP, require_tool
from trainsignals.cli.main import main
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.goodput import CATEGORIES
from trainsignals.ops.goodput import measure
from trainsignals.ops.query import Prometheus
from trainsignals.simulator.job import Simulation
from trainsignals.simulator.scenarios import RESTART
from trainsignals.stacks.stack import Stack, job_files

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(TOPOLOGY_GROUP)]

SCALE = 60
SAMPLE = 0.25  # real seconds between samples (one simulator tick)
# The data ends this long before it is written: Prometheus appends recording-rule results only
# after the newest backfilled sample ("out of bounds" otherwise).
ENDS_BEFORE = 5
FAMILIES = {"trainsignals_time_seconds", "trainsignals_steps", "trainsignals_global_step"}


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def simulate(spec_path: Path, start: float) -> tuple[Simulation, list[dict[str, float]], str]:
    """Run the restart scenario; the OpenMetrics text and the truth at every sample."""
    spec = load_specs([spec_path])[0]
    sim = Simulation(spec, RESTART, time_scale=SCALE, nodes=1, gpus_per_node=2, start_time=start)
    families: dict[str, tuple[str, list[str]]] = {"up": ("gauge", [])}
    truth: list[dict[str, float]] = []
    samples = int(RESTART.duration / SCALE / SAMPLE)
    for k in range(samples + 1):
        sim.advance_to(k * SAMPLE * SCALE)
        truth.append(dict(sim.truth))
        ts = f"{sim.real_time_at(sim.sim_time):.3f}"
        for target in sim.targets():
            if target.kind != "training":
                continue
            labels = {
                **sim.spec.selector_labels,
                "job": sim.spec.scrape_jobs.training,
                "node": target.node,
                "rank": str(target.rank),
            }
            text = sim.scrape(target)
            families["up"][1].append(f"up{_labels(labels)} {0 if text is None else 1} {ts}")
            for family in text_string_to_metric_families(text or ""):
                if family.name not in FAMILIES:
                    continue
                lines = families.setdefault(family.name, (family.type, []))[1]
                for s in family.samples:
                    lines.append(
                        f"{s.name}{_labels({**s.labels, 'job': labels['job']})} {s.value} {ts}"
                    )
    text = []
    for name, (kind, lines) in families.items():
        text.append(f"# TYPE {name} {kind}")
        text += sorted(lines, key=lambda line: (line.split(" ")[0], float(line.split(" ")[2])))
    return sim, truth, "\n".join(text) + "\n# EOF\n"


def truth_between(truth: list[dict[str, float]], a: int, b: int) -> dict[str, float]:
    """Shares of the ground truth between sample indexes a and b."""
    seconds = {c: truth[b].get(c, 0.0) - truth[a].get(c, 0.0) for c in ("goodput", *CATEGORIES)}
    total = sum(seconds.values())
    return {c: v / total for c, v in seconds.items()}


def test_goodput_command_and_rules_match_the_simulators_truth(tmp_path: Path) -> None:
    require_tool("promtool")
    start = time.time() - RESTART.duration / SCALE - ENDS_BEFORE
    sim, truth, openmetrics = simulate(JOBS / "minimal.yaml", start)
    data = tmp_path / "stack" / "prom-data"
    data.parent.mkdir(parents=True)
    (tmp_path / "backfill.om").write_text(openmetrics, encoding="utf-8")
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(tmp_path / "backfill.om"),
            str(data),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    rules = tmp_path / "rules.yaml"
    files = job_files(sim.spec, SCALE)
    rules.write_text(next(v for k, v in files.items() if k.endswith(".rules.yaml")))
    targets = tmp_path / "targets"
    targets.mkdir()
    spec_dir = tmp_path / "jobs"
    spec_dir.mkdir()
    (spec_dir / "minimal.yaml").write_text((JOBS / "minimal.yaml").read_text())

    with Stack(tmp_path / "stack", [sim.spec], [targets], [rules]) as stack:
        # A range around the restart: 30 min to 2h40 simulated, samples at both ends.
        a, b = int(30 * 60 / SCALE / SAMPLE), int(160 * 60 / SCALE / SAMPLE)
        t0, t1 = start + a * SAMPLE, start + b * SAMPLE
        result = CliRunner().invoke(
            main,
            [
                "goodput",
                "--job",
                "minimal",
                "--from",
                f"{t0:.3f}",
                "--to",
                f"{t1:.3f}",
                "--prometheus",
                stack.prometheus_url,
                "--jobs",
                str(spec_dir),
            ],
        )
        assert result.exit_code == 0, result.output
        prom = Prometheus(stack.prometheus_url)
        measured = measure(prom, sim.spec, t0, t1)
        expected = truth_between(truth, a, b)
        assert expected["lost_progress"] > 0.05 and expected["recovery"] > 0.02  # a real restart
        for category, share in expected.items():
            assert measured.share(category) == pytest.approx(share, abs=0.01), category
        assert f"{100 * measured.ettr:.2f}%" in result.output

        # The recording rules, evaluated live on the same data: they add up to 1 and agree
        # with the command over their own window.
        deadline = time.monotonic() + 20
        while not (
            got := prom.query(
                'job:trainsignals_goodput:ratio_1h{training_job="minimal"}', time.time()
            )
        ):
            assert time.monotonic() < deadline, "no goodput recording"
            time.sleep(0.5)
        # The sample's own time (an instant query answers with the query's time).
        goodput = 'job:trainsignals_goodput:ratio_1h{training_job="minimal"}'
        at = float(prom.query(f"timestamp({goodput})", time.time())[0]["value"][1])
        got = prom.query(goodput, at)
        badput = prom.query('job:trainsignals_badput:ratio_1h{training_job="minimal"}', at)
        ratios = {r["metric"]["category"]: float(r["value"][1]) for r in badput}
        ratios["goodput"] = float(got[0]["value"][1])
        assert sum(ratios.values()) == pytest.approx(1.0, abs=1e-9)
        window = measure(prom, sim.spec, at - 3600 / SCALE, at)
        for category, ratio in ratios.items():
            assert ratio == pytest.approx(window.share(category), abs=1e-9), category
