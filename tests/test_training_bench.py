"""The overhead benchmark runs (few iterations; figures are printed by the script, not asserted)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import load_script

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_instrumentation.py"


def test_benchmark_runs_and_reports_its_figures(capsys) -> None:
    bench = load_script(BENCH)
    result = bench.measure(iterations=200, repeats=1)
    assert set(result) == {
        "empty_us",
        "instrumented_us",
        "overhead_us",
        "collective_mark_us",
        "own_work_us",
    }
    assert result["instrumented_us"] > 0
    bench.main(["bench", "100", "2"])
    out = capsys.readouterr().out
    assert "instrumentation cost" in out and "one collective mark" in out
    assert "own work + one collective_wait()" in out  # issue 28's per-step figure
