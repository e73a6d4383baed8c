"""A new user's walk with the installed wheel, away from the repository (issue 27, item 5).

From an empty folder outside the repository, with a spec that is not among the examples (a
16 x 8 H100 job on Kubernetes), the wheel's commands validate, generate, pass promtool and
amtool, run the demo's GPU-lost scenario for a bounded time, check readiness and draft a
postmortem against the demo's live stack, and diff two generations without git. No output
names a repository path (`generator/...`, `make dashboards`: nothing a wheel user has) and
nothing is written outside the folders each command was given: the venv's site-packages and
the working folder are compared before and after.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

from trainsignals.stacks import reaper

from .conftest import require_tool
from .test_away_from_repo import repo_paths
from .wheel_build import Installed

pytestmark = pytest.mark.xdist_group("wheel")
T = TypeVar("T")

SPEC = """\
# A mixture-of-experts pretraining run on 16 nodes of 8 H100s, on Kubernetes.
name: moe-30b
team: moe-research
owners: [moe-lead@example.org]
rotation: moe-oncall
shape:
  nodes: 16
  gpus_per_node: 8
  gpu_model: H100-SXM
  model_flops_per_token: 1.8e11
alerts: {LossPlateau: ticket}
routing:
  page: {kind: pagerduty, secret: {name: moe-pagerduty, key: routing-key}}
  ticket: {kind: slack, secret: {name: moe-slack, key: webhook-url}}
recovery:
  infra_team: gpu-infra
  infra_routing:
    page: {kind: pagerduty, secret: {name: gpu-infra-pagerduty, key: routing-key}}
    ticket: {kind: slack, secret: {name: gpu-infra-slack, key: webhook-url}}
deploy:
  kubernetes:
    namespace: moe-monitoring
    training_namespace: moe-training
"""
# The folders the walk hands to commands; nothing else may appear in the working folder.
GIVEN = {"jobs", "jobs-ticket", "out", "out-ticket", "demo", "pm"}
# Bounded demo: healthy, GPU lost after 10 s, pages within seconds. The fault clock starts with
# the simulation, before all targets are up: 5 s lost the GPU before the stack's wait ended
# on a loaded machine, and the demo exited.
DEMO_SECONDS = 45
URL = re.compile(r"^(prometheus|alertmanager)\s+(http://127\.0\.0\.1:\d+)\s*$")


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


class Walk:
    """Runs the installed commands in `cwd`, keeping every output for the repository-path
    check."""

    def __init__(self, installed: Installed, cwd: Path) -> None:
        self.installed, self.cwd = installed, cwd
        self.outputs: list[tuple[str, str]] = []

    def __call__(self, *argv: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
        done = self.installed.run(*argv, cwd=self.cwd)
        self.outputs.append((" ".join(argv), done.stdout + done.stderr))
        assert done.returncode in ok, f"{argv}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done


def _site_packages(installed: Installed) -> Path:
    (found,) = installed.venv.glob("lib/python*/site-packages")
    return found


def test_a_new_user_walks_from_spec_to_postmortem(installed: Installed) -> None:
    for tool in ("promtool", "amtool", "prometheus", "prometheus-alertmanager"):
        require_tool(tool)
    cwd = installed.work / "walk"
    cwd.mkdir()
    site = _site_packages(installed)
    site_before = _snapshot(site)
    walk = Walk(installed, cwd)
    demoted = SPEC.replace("{LossPlateau: ticket}", "{LossPlateau: ticket, GpuLost: ticket}")
    for folder, text in (("jobs", SPEC), ("jobs-ticket", demoted)):
        (cwd / folder).mkdir()
        (cwd / folder / "moe-30b.yaml").write_text(text, encoding="utf-8")

    # validate and generate: the placeholder image is named with its fix.
    checked = walk("trainsignals", "validate", "--jobs", "jobs")
    assert "deploy.kubernetes.gpu_exporter_image" in checked.stderr
    walk("trainsignals", "generate", "--jobs", "jobs", "--out", "out")
    walk("trainsignals", "generate", "--jobs", "jobs-ticket", "--out", "out-ticket")
    out = cwd / "out"
    assert (out / "deploy" / "kubernetes" / "moe-30b.yaml").is_file()
    walk("trainsignals", "check", "--jobs", "jobs", "--out", "out")

    # promtool and amtool on the output (the job's full rule tests take minutes on two cores:
    # its first test here, every test in tests/test_promtool.py for the examples).
    rules = sorted(str(p.relative_to(cwd)) for p in (out / "alerts").glob("*.rules.yaml"))
    walk(require_tool("promtool"), "check", "rules", *rules)
    tests = yaml.safe_load((out / "alerts" / "moe-30b.test.yaml").read_text(encoding="utf-8"))
    tests["tests"] = tests["tests"][:1]
    first = out / "alerts" / "first.test.yaml"  # beside the rules its rule_files names
    first.write_text(yaml.safe_dump(tests), encoding="utf-8")
    try:
        walk(require_tool("promtool"), "test", "rules", "out/alerts/first.test.yaml",
             "out/alerts/oncall.test.yaml")  # fmt: skip
    finally:
        first.unlink()
    walk(require_tool("amtool"), "check-config", "out/alerts/alertmanager.yaml")

    # The demo, bounded, with the user's spec; readiness and postmortem against its stack.
    _demo(installed, walk, cwd)

    # diff without git: two output folders; and outside a checkout, what to do.
    review = walk("trainsignals", "diff", "out", "out-ticket")
    assert "GpuLost" in review.stdout, review.stdout
    lost = walk("trainsignals", "diff", ok=(1,))
    assert "not inside a git checkout" in lost.stderr and "rev-parse" not in lost.stderr

    # No repository path in anything said or written; nothing written outside the folders.
    said = {command: repo_paths(text) for command, text in walk.outputs if repo_paths(text)}
    assert not said, said
    written = {
        p.relative_to(cwd).as_posix(): hits
        for p in cwd.rglob("*")
        if p.is_file() and p.suffix in (".md", ".yaml", ".json", ".yml")
        if (hits := repo_paths(p.read_text(encoding="utf-8")))
    }
    assert not written, written
    assert {p.name for p in cwd.iterdir()} <= GIVEN, sorted(p.name for p in cwd.iterdir())
    site_after = _snapshot(site)
    changed = sorted(set(site_before.items()) ^ set(site_after.items()))
    assert not changed, f"written into site-packages: {changed[:10]}"


def _demo(installed: Installed, walk: Walk, cwd: Path) -> None:
    argv = [installed.bin("python"), "-m", "trainsignals.demo", "--scenario", "gpu_lost",
            "--spec", "jobs/moe-30b.yaml", "--out", "demo", "--fault-after", "10",
            "--duration", str(DEMO_SECONDS)]  # fmt: skip
    proc = reaper.spawn(
        argv,
        cwd=cwd,
        env=installed.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        started = time.time()
        urls = _wait(lambda: _urls(lines), proc, lines, 120)
        prom, am = urls["prometheus"], urls["alertmanager"]
        live = ("--prometheus", prom, "--alertmanager", am, "--jobs", "jobs")
        ready = walk("trainsignals", "readiness", "--job", "moe-30b", *live, "--root", "out",
                     ok=(0, 1))  # fmt: skip
        assert "moe-30b" in ready.stdout + ready.stderr
        _wait(lambda: any("PAGE" in line and "GpuLost" in line for line in lines), proc,
              lines, 60)  # fmt: skip
        drafted = walk("trainsignals", "postmortem", "--job", "moe-30b", "--from",
                       str(int(started)), "--to", str(int(time.time())), *live,
                       "--out", "pm/moe-30b.md")  # fmt: skip
        text = (cwd / "pm" / "moe-30b.md").read_text(encoding="utf-8")
        assert "GpuLost" in text, drafted.stdout
        # GPU-hours of what ran (the demo's 2 x 2), not the spec's 16 x 8.
        assert "(4 GPUs: GPUs reporting" in text, text
        assert len(list((cwd / "pm").glob("*/*.png"))) == 5
        assert proc.wait(timeout=DEMO_SECONDS + 60) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)
        reader.join(10)
        walk.outputs.append(("python -m trainsignals.demo", "".join(lines)))
    provider = yaml.safe_load(
        (cwd / "demo" / "grafana" / "provisioning" / "dashboards" / "trainsignals.yaml").read_text()
    )
    folder = Path(provider["providers"][0]["options"]["path"])
    assert (folder / "moe-30b.json").is_file() and folder.is_relative_to(cwd)


def _urls(lines: list[str]) -> dict[str, str] | None:
    found = dict(m.groups() for line in list(lines) if (m := URL.match(line)))
    return found if {"prometheus", "alertmanager"} <= set(found) else None


def _wait(ready: Callable[[], T | None], proc: subprocess.Popen, lines: list[str],
          seconds: float) -> T:  # fmt: skip
    deadline = time.monotonic() + seconds
    while not (found := ready()):
        assert proc.poll() is None, f"the demo exited {proc.returncode}:\n{''.join(lines)}"
        assert time.monotonic() < deadline, "".join(lines)
        time.sleep(0.5)
    return found
