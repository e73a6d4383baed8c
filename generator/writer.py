"""Put generated files on disk all at once, and compare them with what is there.

Everything is first written under a temporary folder inside the output root (same file
system), then each file is moved into place with os.replace. A failure while generating or
writing leaves the committed files untouched.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trainsignals.generator.output.files import GENERATED_MARK

MANAGED_DIRS = ("alerts", "dashboards", "runbooks", "docs", "deploy")


def _is_generated(path: Path) -> bool:
    try:
        # Dashboards carry the mark in their description, deep in the JSON: read it all.
        return GENERATED_MARK in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def stale_files(root: Path, files: dict[str, str]) -> list[str]:
    """Generated files on disk that the specs no longer produce (a job was removed)."""
    stale = []
    for folder in MANAGED_DIRS:
        for path in sorted((root / folder).glob("**/*")):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and relative not in files and _is_generated(path):
                stale.append(relative)
    return stale


def write_tree(root: Path, files: dict[str, str]) -> list[str]:
    """Write `files` under `root` atomically and remove stale generated files.

    Returns the paths that changed.
    """
    root.mkdir(parents=True, exist_ok=True)
    changed = [p for p, content in files.items() if _read(root / p) != content]
    staging = Path(tempfile.mkdtemp(prefix=".trainsignals-", dir=root))
    try:
        for relative in changed:
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(files[relative], encoding="utf-8")
        for relative in changed:
            destination = root / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / relative, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    stale = stale_files(root, files)
    for relative in stale:
        (root / relative).unlink()
    return sorted(changed + stale)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class Drift:
    differing: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.differing or self.missing or self.stale)

    def lines(self) -> list[str]:
        return (
            [f"differs: {p}" for p in self.differing]
            + [f"missing: {p}" for p in self.missing]
            + [f"stale:   {p} (no spec generates it any more)" for p in self.stale]
        )


def drift(root: Path, files: dict[str, str]) -> Drift:
    """What `write_tree` would change, without writing."""
    result = Drift()
    for relative, content in files.items():
        on_disk = _read(root / relative)
        if on_disk is None:
            result.missing.append(relative)
        elif on_disk != content:
            result.differing.append(relative)
    result.stale = stale_files(root, files)
    return result
