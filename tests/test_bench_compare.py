"""bench/compare.py: two runs of `make bench` compared figure by figure."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "compare.py"


def _compare():
    return load_script(SCRIPT)


def test_a_figure_that_moved_is_reported_and_machine_lines_are_not() -> None:
    compare = _compare()
    first = [
        "   100 rules + dashboard   1   5.79   0.153",
        "alerts 1m 1,024 GPUs 13.9% (12.9-14.6)",
        "machine: load average 0.4, the loop 37 ms",
    ]
    second = [
        "   100 rules + dashboard   1   5.20   0.151",  # 10%: within
        "alerts 1m 1,024 GPUs 13.8% (9.9-14.6)",  # p25 moved 23%
        "machine: load average 9.6, the loop 80 ms",  # the machine, not the code
    ]
    moved, total, report = compare.compare(first, second, 0.2)
    assert (moved, total) == (1, 9)
    assert "12.9 -> 9.9" in report[0]


def test_the_exit_status_says_whether_anything_moved(tmp_path: Path) -> None:
    compare = _compare()
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("rules 5.0 ms\n")
    b.write_text("rules 5.5 ms\n")
    assert compare.main(["compare", str(a), str(b)]) == 0
    b.write_text("rules 7.0 ms\n")
    assert compare.main(["compare", str(a), str(b)]) == 1
    b.write_text("rules 5.0 ms\nmore 1\n")  # a line more: the runs do not match
    assert compare.main(["compare", str(a), str(b)]) == 1
