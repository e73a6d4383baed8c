"""`trainsignals readiness` against real Prometheus and Alertmanager and the simulator.

Two jobs on one stack: `ready-ok`, served as its spec says, and `ready-mislabelled`, whose
targets carry a misspelt training_job label (the usual silent failure: its rules read
nothing, so its alerts can never fire). Readiness must pass the first and name the broken
label, with what the targets carry, for the second. Also the CLI, end to end.
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.conftest import JOBS, ROOT, TOPOLOGY_GROUP, require_tool
from trainsignals.cli.main import main
from trainsignals.generator.alerts.definitions.inputs import missing_expr, required_inputs
from trainsignals.generator.alerts.rules import alert_rules
from trainsignals.generator.loader import load_specs
from trainsignals.generator.signals.promql import RuleContext
from trainsignals.generator.spec.job import JobSpec
from trainsignals.generator.spec.receivers import Routing
from trainsignals.ops.readiness import Check, Job, check_series, readiness
from trainsignals.ops.readiness.checks import render
from trainsignals.ops.readiness.diagnose import PrometheusClient
from trainsignals.simulator.job import Simulation, effective_spec
from trainsignals.stacks.stack import Stack, job_files

# The module's one stack serves all three tests on one worker (its xdist group's).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(TOPOLOGY_GROUP)]
NODES, GPUS_PER_NODE = 1, 2
SCALE = 60
TYPO = "ready-mislabeled"  # what the mislabelled job's targets carry


@dataclass
class Setup:
    stack: Stack
    specs: dict[str, JobSpec]  # name -> effective spec the rules were generated from
    jobs_dir: Path


def _spec(base: JobSpec, name: str) -> JobSpec:
    # The stack routes every receiver to its local webhook (stack.py); the spec says so, so
    # the delivery checks (tests/test_readiness_delivery.py) do not flag the local stack.
    nobody = Routing(notify_nobody=("page", "ticket"))
    spec = base.model_copy(update={"name": name, "routing": nobody})
    return effective_spec(spec, NODES, GPUS_PER_NODE)


def _rules_evaluated(stack: Stack, groups: int, timeout: float = 30.0) -> None:
    """Until every rule of every group has been evaluated at least once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{stack.prometheus_url}/api/v1/rules", timeout=5) as r:
            loaded = json.load(r)["data"]["groups"]
        rules = [rule for g in loaded for rule in g["rules"]]
        if len(loaded) >= groups and all(rule["health"] != "unknown" for rule in rules):
            return
        time.sleep(0.2)
    raise TimeoutError("rules not evaluated")


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    require_tool("prometheus")
    require_tool("prometheus-alertmanager")
    require_tool("amtool")
    base = load_specs([JOBS / "minimal.yaml"])[0]
    specs = {name: _spec(base, name) for name in ("ready-ok", "ready-mislabelled")}
    with tempfile.TemporaryDirectory(prefix="trainsignals-readiness-") as tmp:
        workdir = Path(tmp)
        jobs_dir = workdir / "jobs"
        jobs_dir.mkdir()
        rule_files, sd_dirs = [], []
        for name, spec in specs.items():
            text = job_files(spec, SCALE)[f"alerts/{name}.rules.yaml"]
            rule_files.append(workdir / f"{name}.rules.yaml")
            rule_files[-1].write_text(text, encoding="utf-8")
            sd_dirs.append(workdir / "sd" / name)
            spec_yaml = yaml.safe_dump(spec.model_dump(mode="json", exclude_defaults=True))
            (jobs_dir / f"{name}.yaml").write_text(spec_yaml, encoding="utf-8")
        sims = [
            Simulation(specs["ready-ok"], time_scale=SCALE, targets_dir=sd_dirs[0]),
            # Same job, but its targets say training_job="ready-mislabeled".
            Simulation(_spec(base, TYPO), time_scale=SCALE, targets_dir=sd_dirs[1]),
        ]
        stack = Stack(workdir / "stack", list(specs.values()), sd_dirs, rule_files)
        with stack:
            try:
                for sim in sims:
                    sim.start()
                stack.wait_for_targets(2 * (NODES * GPUS_PER_NODE + 2 * NODES))  # + node_exporters
                _rules_evaluated(stack, 2 * len(specs))
                yield Setup(stack, specs, jobs_dir)
            finally:
                for sim in sims:
                    sim.stop()


def _run(setup: Setup, name: str) -> list[Check]:
    stack = setup.stack
    specs = list(setup.specs.values())
    return readiness(
        setup.specs[name], specs, stack.prometheus_url, stack.alertmanager_url, root=ROOT
    )


def test_healthy_job_is_ready(setup: Setup) -> None:
    checks = _run(setup, "ready-ok")
    report = render("ready-ok", checks)
    assert all(c.ok for c in checks), report
    names = " | ".join(c.name for c in checks)
    for part in ("rules evaluate", "series", "ranks and GPUs", "routes", "runbooks"):
        assert part in names, names
    series = next(c for c in checks if c.name.startswith("series"))
    assert int(series.name.split("(")[1].split()[0]) >= 20, series.name  # really looked


def test_mislabelled_job_names_the_broken_label(setup: Setup) -> None:
    checks = _run(setup, "ready-mislabelled")
    report = render("ready-mislabelled", checks)
    failed = {c.name.split(" (")[0]: c for c in checks if not c.ok}
    assert report.endswith("NOT READY"), report
    series = next(c for name, c in failed.items() if name.startswith("series"))
    label = [p for p, _ in series.problems if p.startswith("label training_job:")]
    assert len(label) == 1, report  # one line for the one cause, not one per series
    assert 'the rules match training_job="ready-mislabelled"' in label[0], label[0]
    assert f'the series carry training_job="{TYPO}"' in label[0], label[0]
    assert "alerts that depend on them: " in label[0], label[0]
    assert all("training_job" in p for p, _ in series.problems), report
    assert any("ranks and GPUs" in name for name in failed), report
    # What does not depend on the targets still passes.
    passed = {c.name.split(" (")[0] for c in checks if c.ok}
    assert {"rule groups loaded", "rules evaluate without error"} <= passed, report


def test_cli_exit_status_and_checklist(setup: Setup) -> None:
    runner = CliRunner()
    stack = setup.stack
    common = ["--prometheus", stack.prometheus_url, "--alertmanager", stack.alertmanager_url]
    common += ["--jobs", str(setup.jobs_dir), "--root", str(ROOT)]
    ok = runner.invoke(main, ["readiness", "--job", "ready-ok", *common])
    assert ok.exit_code == 0, ok.output
    assert "FAIL" not in ok.output and ok.output.rstrip().endswith("READY"), ok.output
    bad = runner.invoke(main, ["readiness", "--job", "ready-mislabelled", *common])
    assert bad.exit_code == 1, bad.output
    assert "FAIL  series" in bad.output and "fix: give the targets the label" in bad.output


def test_scrape_job_named_differently_names_the_job_label(setup: Setup) -> None:
    """The spec expects scrape job `trainer`; Prometheus calls it trainsignals-training."""
    spec = setup.specs["ready-ok"]
    renamed = spec.model_copy(
        update={"scrape_jobs": spec.scrape_jobs.model_copy(update={"training": "trainer"})}
    )
    prom = PrometheusClient(setup.stack.prometheus_url)
    check = check_series(prom, Job.generate(renamed, [renamed]))
    assert not check.ok
    problems = [p for p, _ in check.problems]
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        'label job: the rules match job="trainer", '
        "the series carry job in ['node', 'trainsignals-gpu', 'trainsignals-training']"
    ), problems[0]
    assert "alerts that depend on them: " in problems[0] and "NodeDown" in problems[0]
    assert "set scrape_jobs in jobs/ready-ok.yaml" in check.problems[0][1]


def _missing_inputs(prom: PrometheusClient, spec: JobSpec) -> list[dict]:
    """What AlertInputMissing's expression returns for `spec` on the live stack now."""
    ctx = RuleContext(spec)
    return prom.vector(missing_expr(ctx, required_inputs(ctx, alert_rules(ctx))))


def test_no_alert_input_is_missing_on_a_healthy_job(setup: Setup) -> None:
    """The simulator serves every series the job's page and ticket alerts read: silent,
    once the first step has reported a loss."""
    prom = PrometheusClient(setup.stack.prometheus_url)
    deadline = time.monotonic() + 30
    while (missing := _missing_inputs(prom, setup.specs["ready-ok"])) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert missing == [], [m["metric"].get("series") for m in missing]


def test_a_node_without_a_gpu_exporter_target_is_named(setup: Setup) -> None:
    """The spec expects GPU exporters in scrape job `dcgm`, Prometheus scrapes them as
    trainsignals-gpu: every node has ranks but no GPU-exporter target of the spec's."""
    spec = setup.specs["ready-ok"]
    renamed = spec.model_copy(
        update={"scrape_jobs": spec.scrape_jobs.model_copy(update={"gpu": "dcgm"})}
    )
    missing = _missing_inputs(PrometheusClient(setup.stack.prometheus_url), renamed)
    labels = [m["metric"] for m in missing]
    assert len({m.get("node") for m in labels} - {None}) == NODES, labels  # named per node
    assert [m["series"] for m in labels] == ['up{job="dcgm",training_job="ready-ok"}'] * NODES
    assert labels[0]["alerts"] == "GpuExporterDown", labels
