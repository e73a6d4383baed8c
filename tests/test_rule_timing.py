"""bench/rule_timing.py: the replay waits for Prometheus to merge overlapping blocks."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _rule_timing() -> ModuleType:
    """bench/rule_timing.py as the benches import it (beside figures.py, in sys.modules: its
    dataclasses need that)."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    return importlib.import_module("rule_timing")


def _block(data: Path, name: str, start: int, end: int) -> None:
    (data / name).mkdir(parents=True)
    (data / name / "meta.json").write_text(json.dumps({"minTime": start, "maxTime": end}))


def test_blocks_that_cover_the_same_time_overlap(tmp_path: Path) -> None:
    rule_timing = _rule_timing()
    _block(tmp_path, "a", 0, 7_200_000)
    _block(tmp_path, "b", 7_200_000, 14_400_000)  # maxTime is exclusive: touching is apart
    assert not rule_timing.overlapping(tmp_path)
    _block(tmp_path, "c", 15_000, 4_215_000)  # a shard's second 15 s quarter
    assert rule_timing.overlapping(tmp_path)


def test_a_block_being_written_is_not_counted(tmp_path: Path) -> None:
    rule_timing = _rule_timing()
    _block(tmp_path, "a", 0, 7_200_000)
    _block(tmp_path, "b.tmp-for-creation", 0, 7_200_000)
    assert [p.parent.name for p in rule_timing.block_metas(tmp_path)] == ["a"]
    assert not rule_timing.overlapping(tmp_path)
