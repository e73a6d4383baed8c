"""Generation cost per spec at 1, 100 and 1,000 specs, and peak memory.

Prints per-spec milliseconds beside the goal of issue 18 (rules + dashboard <= 10 ms per spec,
with the promtool tests <= 20 ms; flat from 1 to 1,000 specs) for rules + dashboard alone and
for the whole pipeline (rules, promtool tests, dashboard). Specs are copies of
jobs/llama-8b-finetune.yaml with distinct names (training_job=<name> is in every selector).
What the generator memoises lives for one spec, except bounded caches of parsed selector
texts (which carry the name), of the healthy test timeline's phases and loss per length and
the loss's encoding (signals/test_inputs.py), and of the two goodput test replays and their
encodings (signals/goodput_tests.py): all the same for every spec. The copies cost what
distinct specs of that shape cost.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

from trainsignals.generator.loader import load_specs
from trainsignals.generator.pipeline import Options, generate

ROOT = Path(__file__).resolve().parent.parent


def specs(count: int) -> list:
    base = load_specs([ROOT / "jobs/llama-8b-finetune.yaml"])[0]
    return [
        (base.model_copy(update={"name": f"job-{i:04d}"}), f"jobs/job-{i:04d}.yaml")
        for i in range(count)
    ]


def measure(count: int, options: Options) -> tuple[float, float]:
    """ms per spec (timed alone: tracemalloc slows Python several-fold) and peak MiB."""
    batch = specs(count)
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


if __name__ == "__main__":
    main()
