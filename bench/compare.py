"""Compare two runs of `make bench`, figure by figure (issue 29: every figure within 20%).

    make bench > a.txt; make bench > b.txt; python bench/compare.py a.txt b.txt [tolerance]

Every number of a line is compared with the number at the same place on the same line of the
other run; a figure moved when the two differ by more than `tolerance` (default 0.2) of the
larger. Lines that start with `machine:` describe the machine the run met (load, wall times,
the reference loop's speed), not the code's cost, and are skipped. Prints each line with a
figure that moved, then the count; exits 1 if any moved or the runs' lines do not match.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# 1,024 is one figure; `1, 2` are two.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?")


def figures(line: str) -> list[float]:
    return [float(text.replace(",", "")) for text in NUMBER.findall(line)]


def moved(a: float, b: float, tolerance: float) -> bool:
    larger = max(abs(a), abs(b))
    return larger > 0 and abs(a - b) / larger > tolerance


def compare(first: list[str], second: list[str], tolerance: float) -> tuple[int, int, list[str]]:
    """(figures moved, figures compared, report lines) of two runs' output lines."""
    count = total = 0
    report: list[str] = []
    if len(first) != len(second):
        report.append(f"the runs differ in length: {len(first)} and {len(second)} lines")
    for a, b in zip(first, second, strict=False):
        if a.lstrip().startswith("machine:"):
            continue
        these, those = figures(a), figures(b)
        if len(these) != len(those):
            report.append(f"lines differ in shape:\n  {a.strip()}\n  {b.strip()}")
            continue
        total += len(these)
        changes = [
            f"{x:g} -> {y:g}" for x, y in zip(these, those, strict=True) if moved(x, y, tolerance)
        ]
        if changes:
            count += len(changes)
            report.append(f"{a.strip()[:120]}\n    {', '.join(changes)}")
    return count, total, report


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    tolerance = float(argv[3]) if len(argv) == 4 else 0.2
    first, second = (Path(path).read_text().splitlines() for path in argv[1:3])
    count, total, report = compare(first, second, tolerance)
    print("\n".join(report))
    print(f"moved by more than {tolerance:.0%}: {count} of {total} figures")
    return 1 if count or len(first) != len(second) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
