"""Per-step cost of the training instrumentation: `with step()` + data_wait() + loss().

Plain script (prints, never asserts): `python bench/bench_instrumentation.py [iterations [rounds]]`.
Reports microseconds per step for the instrumented loop body and for the same loop body
without instrumentation, and their difference (the cost a training step pays); then the cost
of one `collective_wait()` mark (the own-work counter needs one per blocking collective the
loop wants left out of its own work) and of the own-work accounting `step()` runs, each timed
in a loop of its own (as a difference of two whole-step loops, ~1 µs of ~12, it swung 2x
between runs), and their sum: what a step pays for its own work to be counted (issue 28 item
1, goal <= 20 µs per step). Every figure is the median of 15 rounds, each at the README
machine's speed (bench/figures.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import median_at_reference

from trainsignals.exporters.training import TrainingMetrics


def _empty(n: int) -> float:
    loss = 1.0
    start = time.perf_counter()
    for _ in range(n):
        loss = loss * 0.999999
    return time.perf_counter() - start


def _instrumented(metrics: TrainingMetrics, n: int) -> float:
    loss = 1.0
    start = time.perf_counter()
    for _ in range(n):
        with metrics.step(tokens=4096, samples=8):
            with metrics.data_wait():
                pass
            loss = loss * 0.999999
        metrics.loss(loss)
    return time.perf_counter() - start


def _marks(metrics: TrainingMetrics, n: int) -> float:
    """One collective mark per iteration, alone."""
    start = time.perf_counter()
    for _ in range(n):
        with metrics.collective_wait():
            pass
    return time.perf_counter() - start


def _own_work(metrics: TrainingMetrics, n: int) -> float:
    """The own-work accounting `step()` does at each step's end, alone."""
    start = time.perf_counter()
    for _ in range(n):
        metrics.own.step(0.25)
    return time.perf_counter() - start


def measure(iterations: int = 50_000, repeats: int = 15) -> dict[str, float]:
    """µs per step at the README machine's speed, the median of `repeats` rounds, each round
    scaled by the reference loop timed around it (figures.median_at_reference): empty loop,
    instrumented loop, the overhead, one collective mark, and the own-work accounting inside
    the overhead. One factor for a whole run of best-of-5 loops let the sub-µs figures move
    by 40-60% between two runs: the machine's speed changed during the run."""
    metrics = TrainingMetrics(rank=0, local_rank=0, world_size=1, node="bench")

    def one_round() -> dict[str, float]:
        per_step = 1e6 / iterations
        empty = _empty(iterations) * per_step
        return {
            "empty_us": empty,
            "instrumented_us": _instrumented(metrics, iterations) * per_step,
            "collective_mark_us": _marks(metrics, iterations) * per_step - empty,
            "own_work_us": _own_work(metrics, iterations) * per_step - empty,
        }

    result = median_at_reference(one_round, repeats)
    return {**result, "overhead_us": result["instrumented_us"] - result["empty_us"]}


def main(argv: list[str]) -> None:
    iterations = int(argv[1]) if len(argv) > 1 else 50_000
    rounds = int(argv[2]) if len(argv) > 2 else 15
    load = os.getloadavg()[0]
    result = measure(iterations, rounds)
    print(
        f"iterations per round : {iterations} (median of {rounds} rounds, each at the README"
        " machine's speed)"
    )
    print(f"machine: load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"empty loop           : {result['empty_us']:.3f} µs/step")
    print(f"instrumented loop    : {result['instrumented_us']:.3f} µs/step")
    print(f"instrumentation cost : {result['overhead_us']:.3f} µs/step (budget 20 µs)")
    print(f"one collective mark  : +{result['collective_mark_us']:.3f} µs/step")
    print(f"own-work accounting  : {result['own_work_us']:.3f} µs/step (inside step())")
    # Issue 28 item 1's budget: what counting each rank's own work adds to a step, the
    # accounting in step() and one collective_wait() mark (a loop leaving one blocking
    # collective out of its own work); then the whole instrumented step with that mark.
    added = result["own_work_us"] + result["collective_mark_us"]
    verdict = "met" if added <= 20 else "NOT met"
    print(f"own work + one collective_wait(): +{added:.3f} µs/step (goal <= 20 µs: {verdict})")
    whole = result["overhead_us"] + result["collective_mark_us"]
    print(f"whole step, instrumented with one collective_wait(): {whole:.3f} µs/step")


if __name__ == "__main__":
    main(sys.argv)
