"""`python -m trainsignals.fleet [--days 54]`: replay the fault history and print the table."""

from __future__ import annotations

import argparse
import signal
import sys

from .history import FULL_DAYS
from .report import render, score
from .run import run_replay
from .spec import MODES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainsignals.fleet", description=__doc__)
    parser.add_argument("--days", type=float, default=FULL_DAYS, help="run length (default 54)")
    parser.add_argument("--seed", type=int, default=405)
    parser.add_argument("--slots", type=int, default=2, help="node slots stored (default 2)")
    parser.add_argument(
        "--shards",
        type=int,
        default=1,
        help="replay through the sharded rule split (edge + global)",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="auto_restart",
        help="recovery.mode of the replayed spec (manual: every interruption is an incident)",
    )
    args = parser.parse_args(argv)
    # `kill` stops Prometheus and promtool too: SystemExit unwinds the context managers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    replay = run_replay(args.days, args.seed, args.slots, shards=args.shards, mode=args.mode)
    print(render(replay, score(replay)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
