"""Each job's files in worker processes: a job's files follow from its spec and the options
alone, so a fleet's specs spread over the machine's cores (`trainsignals generate` on 1,000
specs: one core's ~30 s becomes seconds on a CI runner).

Workers are forked once the specs are loaded, so they start warm and read the specs from the
parent's memory; only the finished files come back (pickled strings). A job that fails in a
worker is run again in the parent, so its error surfaces exactly as without workers. Forking
is Linux-only here (macOS's system libraries are not fork-safe, Windows has no fork): other
platforms, one spec per worker or fewer, and `workers=1` run in this process.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# Below this many specs per worker, forking and carrying the files back cost more than the
# second core saves (one job: ~25 ms).
SPECS_PER_WORKER = 8

# The cyclic collector's first threshold while jobs are generated (Python's default: 700).
# Higher thresholds saved no more time here and raised the peak memory (garbage in cycles
# waits longer).
GEN0_THRESHOLD = 10_000

# What the forked workers run: set just before forking, read by index in the children.
_task: tuple[Callable, Sequence] | None = None


def worker_count(specs: int, requested: int | None = None) -> int:
    """`requested` (None: one per core this process may run on), never more than one per
    SPECS_PER_WORKER specs, and 1 where workers cannot fork."""
    if sys.platform != "linux":
        return 1
    cores = requested if requested is not None else len(os.sched_getaffinity(0))
    return max(1, min(cores, specs // SPECS_PER_WORKER))


def map_in_workers(
    function: Callable[[Item], Result], items: Sequence[Item], workers: int
) -> list[Result]:
    """[function(item) for item in items], in that order, over `workers` forked processes."""
    with fewer_collections():
        if workers <= 1 or len(items) <= 1:
            return [function(item) for item in items]
        return _in_workers(function, items, workers)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The cyclic collector run less often inside the block. A job with tests allocates
    hundreds of thousands of dicts, lists and tuples (its test file) that reference counting
    frees; at the default threshold the collector traversed them again and again, finding a
    few hundred objects in cycles per job: ~9% of a job's time (and more with every memo held)."""
    thresholds = gc.get_threshold()
    if thresholds[0]:  # (0: automatic collection is off, and stays off)
        gc.set_threshold(max(thresholds[0], GEN0_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _in_workers(
    function: Callable[[Item], Result], items: Sequence[Item], workers: int
) -> list[Result]:
    global _task
    _task = (function, items)
    # Objects the workers inherit stay out of their collections: a collection touching each
    # would copy every page of the parent's heap into every worker (gc.freeze's purpose).
    gc.freeze()
    try:
        context = multiprocessing.get_context("fork")
        with context.Pool(workers) as pool:
            chunk = max(1, len(items) // (4 * workers))  # a few chunks each: even finish
            results = list(pool.imap(_run, range(len(items)), chunksize=chunk))
            pool.close()
            pool.join()  # reaped: their CPU time counts as this process's children's
    finally:
        _task = None
        gc.unfreeze()
    # A job that failed in a worker: again here, to raise its error as it is.
    return [function(items[i]) if r is _FAILED else r for i, r in enumerate(results)]


class _Failed:
    def __reduce__(self) -> str:
        return "_FAILED"  # unpickles as the parent's one instance


_FAILED = _Failed()


def _run(index: int) -> object:
    assert _task is not None
    function, items = _task
    try:
        return function(items[index])
    except Exception:
        return _FAILED
