"""The example loop's non-torch parts (torch is an optional extra, absent from the dev venv)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import load_script

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_tiny.py"


@pytest.fixture(scope="module")
def example():
    return load_script(EXAMPLE)


def test_importing_the_example_does_not_import_torch(example) -> None:
    assert "torch" not in vars(example)
    if "torch" not in sys.modules:  # torch absent here: importing must not have needed it
        assert example.parse_args([]).steps == 300


def test_metrics_come_from_launcher_env(example, tmp_path: Path) -> None:
    args = example.parse_args(["--job", "tiny", "--checkpoint-dir", str(tmp_path)])
    m = example.build_metrics(args, {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4"})
    assert (m.rank, m.local_rank, m.world_size) == (3, 1, 4)
    text = m.exposition().decode()
    assert 'training_job="tiny"' in text
    assert "trainsignals_checkpoint_disk_free_bytes" in text


def test_phase_schedule(example) -> None:
    args = example.parse_args(["--warmup-steps", "5", "--eval-every", "10"])
    assert [example.phase_for(s, args) for s in (0, 4, 5, 50)] == [
        "warmup", "warmup", "train", "train",
    ]  # fmt: skip
    assert [s for s in range(31) if example.is_due(s, args.eval_every)] == [10, 20, 30]
    assert not any(example.is_due(s, 0) for s in range(5))
