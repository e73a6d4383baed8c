"""Generation cost per spec at 1, 100 and 1,000 specs, and peak memory.

Prints per-spec milliseconds beside the goal of issue 18 (rules + dashboard <= 10 ms per spec,
with the promtool tests <= 20 ms; flat from 1 to 1,000 specs) for rules + dashboard alone, for
the per-job files (rules, promtool tests, dashboard: `generate()`), and for every file
`trainsignals generate` writes (`generate_all()`: also deploy objects, routing, runbooks).
Wall time and CPU time (this process and its workers) per spec: on a busy machine the CPU
column is the one to compare. Rows are in one process unless they say "workers" (the CLI's
default: one per core, at most one per 8 specs; generator/output/workers.py).

Specs are copies of jobs/llama-8b-finetune.yaml with distinct names (training_job=<name> is in
every selector). What the generator memoises lives for one spec, except bounded caches keyed
on what jobs of one shape share (README, "Generating a fleet's specs"). Renamed copies reuse
those as distinct jobs of one shape do; the "distinct objectives" rows give each copy its own
thresholds and windows, so the test job's throughput and the series built from it differ and
are encoded again.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import REFERENCE_MS, at_reference

from trainsignals.generator.loader import load_specs
from trainsignals.generator.output.workers import worker_count
from trainsignals.generator.pipeline import Options, generate, generate_all

ROOT = Path(__file__).resolve().parent.parent
PEAK_SPECS = 100  # rows up to this many specs get a traced rerun for their peak memory


def specs(count: int, distinct_objectives: bool = False) -> list:
    base = load_specs([ROOT / "jobs/llama-8b-finetune.yaml"])[0]
    out = []
    for i in range(count):
        update: dict = {"name": f"job-{i:04d}"}
        if distinct_objectives:  # every threshold and window its own: no template shared
            objectives = base.objectives
            update["objectives"] = objectives.model_copy(
                update={
                    "step_time_max_seconds": 2.5 + i / 1000,
                    "tokens_per_second_min": 25000 + i,
                    "mfu_min_ratio": 0.30 + i / 100_000,
                    "stall_after": objectives.stall_after + i,
                    "max_pause": objectives.max_pause + i,
                    "checkpoint_max_age": objectives.checkpoint_max_age + i,
                }
            )
        out.append((base.model_copy(update=update), f"jobs/job-{i:04d}.yaml"))
    return out


def _cpu_seconds() -> float:
    """This process's CPU time and that of its reaped children (the generator's workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(
    count: int, options: Options, distinct: bool = False, every_file: bool = False
) -> tuple[float, float, float]:
    """(wall ms per spec, CPU ms per spec, peak MiB). Timed alone (tracemalloc slows Python
    several-fold); the peak is measured in one process, up to PEAK_SPECS specs (nan
    otherwise). Memory grows with the specs because every file is held until the end (atomic
    writes): linearly, so the 100-spec rows give it per spec, and a traced rerun of 300 specs
    (minutes on a loaded machine) told nothing more."""
    batch = specs(count, distinct)
    run = generate_all if every_file else generate
    elapsed = cpu = float("inf")
    # A run of a few specs lasts milliseconds: one full collection of what earlier rows left
    # (~15-30 ms) would be most of it. So the garbage goes first, and a short row is the best
    # of 5 runs (as timeit does); the long rows pay their own collections, as a real run does.
    for _ in range(5 if count < 10 else 1):
        gc.collect()
        started, cpu_before = time.perf_counter(), _cpu_seconds()
        files = run(batch, options)
        elapsed = min(elapsed, time.perf_counter() - started)
        cpu = min(cpu, _cpu_seconds() - cpu_before)
        assert len(files) >= count
    if options.workers != 1 or count > PEAK_SPECS:  # (tracemalloc: minutes, or not the workers')
        return elapsed * 1000 / count, cpu * 1000 / count, float("nan")
    tracemalloc.start()
    run(batch, options)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed * 1000 / count, cpu * 1000 / count, peak / 2**20


ROWS = [  # (specs, what, options, goal, distinct objectives, every file)
    (1, "rules + dashboard", Options(with_tests=False), 10, False, False),
    (100, "rules + dashboard", Options(with_tests=False), 10, False, False),
    (1000, "rules + dashboard", Options(with_tests=False), 10, False, False),
    (100, "  same, distinct objectives", Options(with_tests=False), None, True, False),
    (1, "rules + dashboard + tests", Options(), 20, False, False),
    (100, "rules + dashboard + tests", Options(), 20, False, False),
    (300, "rules + dashboard + tests", Options(), 20, False, False),
    (1000, "rules + dashboard + tests", Options(), 20, False, False),
    (300, "  same, workers", Options(workers=None), 20, False, False),
    (100, "  same, distinct objectives", Options(), None, True, False),
    (300, "every file (`generate`)", Options(), None, False, True),
    (300, "  same, workers", Options(workers=None), None, False, True),
]


def main() -> None:
    load, began = os.getloadavg(), time.monotonic()
    generate_all(specs(1), Options())  # imports and template compilation are not per-spec cost
    cores = len(os.sched_getaffinity(0))
    print(f"generator: cost per spec (copies of llama-8b-finetune), {cores} cores")
    print("  wall: elapsed / specs; cpu: CPU time of this process and its workers / specs;")
    print(
        f"  both at the README machine's speed (bench/figures.py: the reference loop measured"
        f" around each row, scaled to its {REFERENCE_MS:.0f} ms there); cpu/ref: cpu in loops"
    )
    head = f"{'specs':>6} {'what':<29} {'workers':>7} {'wall ms':>8} {'cpu ms':>7} {'goal':>6}"
    print(f"{head} {'cpu/ref':>8} {'peak MiB':>9}")
    loops = []
    for count, label, options, goal, distinct, every_file in ROWS:
        (wall, cpu, peak), factor = at_reference(
            lambda: measure(count, options, distinct, every_file)  # noqa: B023 (called here)
        )
        loops.append(REFERENCE_MS / factor)
        wall, cpu = wall * factor, cpu * factor
        workers = worker_count(count, options.workers)
        limit = f"<={goal}" if goal else ""
        print(
            f"{count:>6} {label:<29} {workers:>7} {wall:>8.2f} {cpu:>7.2f} {limit:>6}"
            f" {cpu / REFERENCE_MS:>8.3f} {peak:>9.1f}"
        )
    print(f"machine: the reference loop here: {min(loops):.0f}-{max(loops):.0f} ms (its speed now)")
    # The machine may be shared: its load says how far wall times can be trusted.
    print(
        f"machine: load average (1/5/15 min) at start {' '.join(f'{x:.1f}' for x in load)}, at end "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; bench took "
        f"{(time.monotonic() - began) / 60:.1f} min"
    )


if __name__ == "__main__":
    main()
