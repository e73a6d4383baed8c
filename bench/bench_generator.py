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
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import REFERENCE_MS, RoundSpeed

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


CHUNKS = 10  # a row of 10 specs or more is timed in this many chunks (or more, up to 100)
SHORT_REPEATS = 15  # a row of fewer specs is timed this many times (5 let it move 20%)


def measure(
    count: int, options: Options, distinct: bool = False, every_file: bool = False
) -> tuple[float, float, float, list[float]]:
    """(wall ms per spec, CPU ms per spec, peak MiB, the reference loop's ms while timed), the
    costs at the README machine's speed. Each timing is scaled by the reference loop measured
    just before and after it (figures.RoundSpeed), and the figure is the median of those: a row
    of 10 specs or more is generated in CHUNKS consecutive chunks (one timing each, every
    chunk's files held until the row ends, as one run of `count` specs holds them), a shorter
    row SHORT_REPEATS times. With one loop timed around a whole row, rows of one run moved in
    opposite directions between two runs (by up to 43%): the machine's speed changed within
    the row. Timed alone (tracemalloc slows Python several-fold); the peak is measured in one
    process, up to PEAK_SPECS specs (nan otherwise). Memory grows with the specs because
    every file is held until the end (atomic writes): linearly, so the 100-spec rows give it
    per spec."""
    batch = specs(count, distinct)
    run = generate_all if every_file else generate
    if count < CHUNKS:
        chunks = [batch] * SHORT_REPEATS
    else:
        size = max(count // CHUNKS, count // 100, 1)
        chunks = [batch[i : i + size] for i in range(0, count, size)]
    walls, cpus, loops, held = [], [], [], []
    # The garbage earlier rows left goes first (a full collection is ~15-30 ms: most of a
    # short row); a long row pays its own collections, as a real run does.
    gc.collect()
    speed = RoundSpeed()
    for chunk in chunks:
        if count < CHUNKS:
            gc.collect()
        started, cpu_before = time.perf_counter(), _cpu_seconds()
        files = run(chunk, options)
        elapsed, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_before
        factor = speed.factor()
        assert len(files) >= len(chunk)
        if count >= CHUNKS:
            held.append(files)
        walls.append(elapsed * 1000 / len(chunk) * factor)
        cpus.append(cpu * 1000 / len(chunk) * factor)
        loops.append(REFERENCE_MS / factor)
    del held
    wall, cpu = statistics.median(walls), statistics.median(cpus)
    if options.workers != 1 or count > PEAK_SPECS:  # (tracemalloc: minutes, or not the workers')
        return wall, cpu, float("nan"), loops
    tracemalloc.start()
    run(batch, options)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return wall, cpu, peak / 2**20, loops


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
        f" around each timing, scaled to its {REFERENCE_MS:.0f} ms there), the median of a"
        f" row's {CHUNKS}+ chunks (or of {SHORT_REPEATS} runs of a short row); cpu/ref: cpu"
        " in loops"
    )
    head = f"{'specs':>6} {'what':<29} {'workers':>7} {'wall ms':>8} {'cpu ms':>7} {'goal':>6}"
    print(f"{head} {'cpu/ref':>8} {'peak MiB':>9}")
    loops: list[float] = []
    for count, label, options, goal, distinct, every_file in ROWS:
        wall, cpu, peak, row_loops = measure(count, options, distinct, every_file)
        loops += row_loops
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
