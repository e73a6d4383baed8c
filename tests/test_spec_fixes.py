"""Spec errors and placeholders a new user meets (issue 27, item 7): each names its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.generator.loader import SpecError, load_specs
from trainsignals.generator.spec.deploy import GPU_EXPORTER_IMAGE
from trainsignals.generator.spec.placeholders import placeholder_warnings

PLAIN = """\
name: demo
team: ml
shape: {gpu_model: H100-SXM, model_flops_per_token: 4.2e10}
routing:
  page: {kind: pagerduty, secret: {file: PAGE_FILE}}
  ticket: {kind: slack, secret: {file: /etc/alertmanager/secrets/ml-slack}}
"""

ON_KUBERNETES = """\
name: moe-30b
team: ml
shape: {nodes: 16, gpus_per_node: 8, gpu_model: H100-SXM, model_flops_per_token: 1.8e11}
routing:
  page: {kind: pagerduty, secret: {name: ml-pd, key: key}}
  ticket: {kind: slack, secret: {name: ml-slack, key: url}}
deploy: {kubernetes: KUBERNETES}
"""


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "demo.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_specs([path])
    return caught.value.problems


def test_relative_secret_file_names_an_absolute_path(tmp_path: Path) -> None:
    (line,) = _problems(tmp_path, PLAIN.replace("PAGE_FILE", "secrets/ml-pd"))
    assert "routing.page.secret.file" in line
    assert "write an absolute path, e.g. /etc/alertmanager/secrets/" in line


@pytest.mark.parametrize(
    ("written", "fix"),
    [(85, "write 0.85 (a ratio, not a percentage)"), (99.9, "write 0.999 (a ratio")],
)
def test_objective_as_a_percentage_names_the_ratio(
    tmp_path: Path, written: float, fix: str
) -> None:
    text = (
        PLAIN.replace("PAGE_FILE", "/etc/pd") + f"slos: [{{sli: goodput, objective: {written}}}]\n"
    )
    (line,) = _problems(tmp_path, text)
    assert "slos[0].objective" in line
    assert fix in line


def _warnings(tmp_path: Path, kubernetes: str, extra: str = "") -> list[str]:
    path = tmp_path / "moe-30b.yaml"
    path.write_text(ON_KUBERNETES.replace("KUBERNETES", kubernetes) + extra, encoding="utf-8")
    (spec,) = load_specs([path])
    return placeholder_warnings([(spec, "jobs/moe-30b.yaml")], None)


def test_placeholder_exporter_image_is_named_with_its_fix(tmp_path: Path) -> None:
    (line,) = [w for w in _warnings(tmp_path, "{}") if "gpu_exporter_image" in w]
    assert line.startswith("jobs/moe-30b.yaml: deploy.kubernetes.gpu_exporter_image:")
    assert GPU_EXPORTER_IMAGE in line
    assert "set gpu_exporter_image" in line
    # Not when the job names its own image, nor when no DaemonSet is deployed (dcgm).
    own = _warnings(tmp_path, "{gpu_exporter_image: registry.corp/trainsignals:0.1.0}")
    assert not [w for w in own if "gpu_exporter_image" in w]
    dcgm = _warnings(tmp_path, "{}", "gpu_metrics: dcgm\n")
    assert not [w for w in dcgm if "gpu_exporter_image" in w]


def test_validate_prints_the_image_warning(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "moe-30b.yaml").write_text(ON_KUBERNETES.replace("KUBERNETES", "{}"))
    done = CliRunner().invoke(main, ["validate", "--jobs", str(jobs)], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert "jobs/moe-30b.yaml: deploy.kubernetes.gpu_exporter_image: the default" in done.output
