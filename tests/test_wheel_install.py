"""The package as a user installs it: no editable install, no repository on the path.

The suite otherwise imports the editable install, which maps the source folders and so hides
a module or data file the wheel leaves out (issue 18: `trainsignals.generator.alertdefs` was
missing from the hand-written package list). Here `python -m build` makes the sdist and, from
the unpacked sdist, the wheel (so both must be complete); the wheel goes into a fresh venv, and
from a temporary folder with a clean environment that venv generates jobs/, serves the fake
GPUs and records training steps.
"""

from __future__ import annotations

import shutil
import socket
import stat
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from trainsignals import __version__
from trainsignals.generator.writer import stale_files
from trainsignals.stacks import reaper

from .conftest import ROOT
from .wheel_build import Installed, package_folders

pytestmark = pytest.mark.xdist_group("wheel")


def test_wheel_holds_every_module_and_template(installed: Installed) -> None:
    wheel = zipfile.ZipFile(installed.wheel)
    names = set(wheel.namelist())
    folders = package_folders()
    assert {"trainsignals.generator", "trainsignals.exporters"} <= folders.keys()
    expected = set()
    for package, folder in folders.items():
        prefix = package.replace(".", "/")
        for path in folder.rglob("*"):  # rglob does not follow links: each folder once
            relative = path.relative_to(folder).as_posix()
            if path.suffix in (".py", ".j2") and "__pycache__" not in relative:
                expected.add(f"{prefix}/{relative}")
    missing = sorted(expected - names)
    assert not missing, f"the wheel lacks {missing}: pyproject's packages.find or package-data"
    # Real files where the checkout has links (a link in a wheel is a dangling name).
    links = [i.filename for i in wheel.infolist() if stat.S_ISLNK(i.external_attr >> 16)]
    assert not links, links
    top = {name.split("/")[0] for name in names}
    assert top == {"trainsignals", f"trainsignals-{__version__}.dist-info"}, (
        "no generic top-level name in site-packages (DESIGN.md)"
    )
    assert installed.wheel.name == f"trainsignals-{__version__}-py3-none-any.whl"
    assert installed.sdist.name == f"trainsignals-{__version__}.tar.gz"


def test_installed_package_is_the_wheel_and_has_no_torch(installed: Installed) -> None:
    probe = installed.python(
        "import importlib.util, sys, trainsignals",
        "print(trainsignals.__file__)",
        "print(importlib.util.find_spec('torch') is not None)",
        "print(sys.path)",
    )
    assert probe.returncode == 0, probe.stderr
    location, torch, path = probe.stdout.splitlines()
    assert Path(location).is_relative_to(installed.venv), location
    assert torch == "False"
    assert str(ROOT) not in path


def test_installed_cli_generates_the_committed_files(installed: Installed) -> None:
    shutil.copytree(ROOT / "jobs", installed.work / "jobs")
    out = installed.work / "out"
    done = installed.run("trainsignals", "generate", "--jobs", "jobs", "--out", "out")
    assert done.returncode == 0, done.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(written) > 50, written
    differing = [p for p in written if (out / p).read_bytes() != _committed(p)]
    assert not differing, f"the installed generator writes other bytes: {differing}"
    # And it writes every generated file the repository has (none left out).
    assert stale_files(ROOT, dict.fromkeys(written, "")) == []
    # The postmortem's template is package data too (postmortem needs a Prometheus to run).
    probe = installed.python(
        "from trainsignals.ops.postmortem.draft import TEMPLATES",
        "assert (TEMPLATES / 'postmortem.md.j2').is_file(), TEMPLATES",
    )
    assert probe.returncode == 0, probe.stderr


def _committed(relative: str) -> bytes | None:
    path = ROOT / relative
    return path.read_bytes() if path.is_file() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(url: str, proc: subprocess.Popen, deadline: float) -> str:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.read().decode()
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.terminate()
                raise AssertionError(proc.communicate(timeout=10)[1]) from None
            time.sleep(0.1)


def test_installed_gpu_exporter_serves_fake_gpus(installed: Installed) -> None:
    port = _free_port()
    argv = [installed.bin("trainsignals-gpu-exporter"), "--fake", "2", "--node", "wheel",
            "--listen-address", "127.0.0.1", "--port", str(port)]  # fmt: skip
    proc = reaper.spawn(
        argv,
        cwd=installed.work,
        env=installed.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        text = _scrape(f"http://127.0.0.1:{port}/metrics", proc, time.monotonic() + 30)
    finally:
        proc.terminate()
        proc.wait(10)
    ups = {
        s.labels["gpu"]: (s.labels["node"], s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "trainsignals_gpu_up"
    }
    assert ups == {"0": ("wheel", 1.0), "1": ("wheel", 1.0)}


INSTRUMENTED = """
import urllib.request
from trainsignals.exporters.training import TrainingMetrics

metrics = TrainingMetrics(node="wheel", labels={"training_job": "wheel"})
port = metrics.start_http_server(port=0, addr="127.0.0.1")
for _ in range(3):
    with metrics.step(tokens=1000, samples=8):
        with metrics.data_wait():
            pass
    metrics.loss(2.5)
with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
    print(resp.read().decode())
"""


def test_installed_instrumentation_records_steps(installed: Installed) -> None:
    done = installed.run("python", "-c", INSTRUMENTED)
    assert done.returncode == 0, done.stderr
    samples = {
        s.name: s.value
        for family in text_string_to_metric_families(done.stdout)
        for s in family.samples
        if s.labels.get("training_job") == "wheel"
    }
    assert samples["trainsignals_steps_total"] == 3
    assert samples["trainsignals_tokens_total"] == 3000
    assert samples["trainsignals_loss"] == 2.5
