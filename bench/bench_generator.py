"""Generation cost per spec at 1, 100 and 1,000 specs, and peak memory.

Prints per-spec milliseconds beside the goal of issue 18 (rules + dashboard <= 10 ms per spec,
with the promtool tests <= 20 ms; flat from 1 to 1,000 specs) for rules + dashboard alone and
for the whole pipeline (rules, promtool tests, dashboard). Specs are copies of
jobs/llama-8b-finetune.yaml with distinct names (training_job=<name> is in every selector).
What the generator memoises lives for one spec, except bounded caches keyed on what jobs of
one shape share: parsed selector texts; the healthy test timeline's phases and loss per length;
the test job's encoded series groups, keyed on the exact samples of the timeline fields each
group reads (signals/test_inputs.py); the two goodput test replays and their
encodings (signals/goodput_tests.py: the same for every spec); and what each PromQL
expression reads, parsed once per *template* (the expression with its string literals, the
job name among them, as placeholders: generator/signals/promql_inputs.py). Renamed copies
therefore reuse those as distinct jobs of one shape do; a last row gives each copy its own
objectives (thresholds and windows), so every expression that carries one is parsed again.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

from trainsignals.generator.loader import load_specs
from trainsignals.generator.pipeline import Options, generate

ROOT = Path(__file__).resolve().parent.parent


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


def measure(count: int, options: Options, distinct: bool = False) -> tuple[float, float]:
    """ms per spec (timed alone: tracemalloc slows Python several-fold) and peak MiB."""
    batch = specs(count, distinct)
    started = time.perf_counter()
    files = generate(batch, options)
    elapsed = time.perf_counter() - started
    assert len(files) >= count
    tracemalloc.start()
    generate(batch, options)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed * 1000 / count, peak / 2**20


def main() -> None:
    generate(specs(1), Options())  # imports and template compilation are not per-spec cost
    print("generator: cost per spec (copies of llama-8b-finetune)")
    print(f"{'specs':>6} {'what':<28} {'ms/spec':>9} {'goal':>6} {'peak MiB':>9}")
    for label, options, goal in (
        ("rules + dashboard", Options(with_tests=False), 10),
        ("rules + dashboard + tests", Options(), 20),
    ):
        for count in (1, 100, 1000):
            if count == 1000 and options.with_tests:
                count = 300  # keeps `make bench` short; per-spec cost is already flat
            per_spec, peak = measure(count, options)
            print(f"{count:>6} {label:<28} {per_spec:>9.2f} {f'<={goal}':>6} {peak:>9.1f}")
    per_spec, peak = measure(100, Options(with_tests=False), distinct=True)
    label = "  same, distinct objectives"
    print(f"{100:>6} {label:<28} {per_spec:>9.2f} {'':>6} {peak:>9.1f}")


if __name__ == "__main__":
    main()
