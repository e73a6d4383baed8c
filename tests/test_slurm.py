"""Slurm: the hostlist parser and `trainsignals slurm-targets` (write, remove, bad input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainsignals.cli.main import main
from trainsignals.cli.slurm import HostlistError, expand_hostlist

from .conftest import JOBS


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ["node1"]),
        ("gpu[001-004,010],login1", ["gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "login1"]),
        ("a[8-11]", ["a8", "a9", "a10", "a11"]),
        ("a[08-11]", ["a08", "a09", "a10", "a11"]),
        ("rack[1-2]-gpu[1,3]", ["rack1-gpu1", "rack1-gpu3", "rack2-gpu1", "rack2-gpu3"]),
        ("n[1-2],n2,m", ["n1", "n2", "m"]),  # duplicates once, order kept
        ("dgx-h100-[1-2].cluster", ["dgx-h100-1.cluster", "dgx-h100-2.cluster"]),
    ],
)
def test_expand_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu[1-", "unclosed"),
        ("gpu1-2]", "unbalanced"),
        ("gpu[4-1]", "backwards"),
        ("gpu[a-b]", "bad range"),
        ("gpu[[1-2]]", "nested"),
        ("", "empty"),
        ("gpu[1-9999999]", "more than"),
    ],
)
def test_bad_hostlists_are_refused(text: str, message: str) -> None:
    with pytest.raises(HostlistError, match=message):
        expand_hostlist(text)


def test_slurm_targets_writes_and_removes_file_sd(tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_ID": "4242"}
    args = ["slurm-targets", "--spec", str(JOBS / "gpt-70b-pretrain.yaml"), "--dir", str(tmp_path)]
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 0, result.output
    training = json.loads((tmp_path / "training-4242.json").read_text())
    gpu = json.loads((tmp_path / "gpu-4242.json").read_text())
    labels = {"cluster": "h200-east", "training_job": "gpt-70b-pretrain"}
    assert training[0]["labels"] == {**labels, "node": "gpu01"}
    assert training[1]["targets"] == [f"gpu02:{9850 + r}" for r in range(8)]
    assert gpu == [
        {"labels": {**labels, "node": "gpu01"}, "targets": ["gpu01:9842"]},
        {"labels": {**labels, "node": "gpu02"}, "targets": ["gpu02:9842"]},
    ]
    # node_exporter too: the scrape config reads node*.json (the fabric alerts, and the meta
    # rule ScrapeTargetsVanished{vanished="node"} pages without them).
    node = json.loads((tmp_path / "node-4242.json").read_text())
    assert node == [
        {"labels": {**labels, "node": "gpu01"}, "targets": ["gpu01:9100"]},
        {"labels": {**labels, "node": "gpu02"}, "targets": ["gpu02:9100"]},
    ]
    result = CliRunner().invoke(main, [*args, "--remove"], env=env)
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []


def test_slurm_targets_bad_nodelist_names_the_option_and_writes_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["slurm-targets", "--spec", str(JOBS / "minimal.yaml"), "--dir", str(tmp_path)],
        env={"SLURM_JOB_NODELIST": "gpu[1-", "SLURM_JOB_ID": "7"},
    )
    assert result.exit_code == 2
    assert "SLURM_JOB_NODELIST" in result.output and "unclosed" in result.output
    assert list(tmp_path.iterdir()) == []
