"""Prometheus file_sd target files, written atomically (Prometheus may read at any moment)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry


@dataclass
class Target:
    """One endpoint the simulation serves: a training rank or a node's GPU exporter."""

    kind: str  # "training", "gpu" or "node" (node_exporter)
    node: str
    rank: int | None  # None for the GPU exporter
    registry: CollectorRegistry
    host: str = "127.0.0.1"
    port: int | None = None  # set once served (start())

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def file_sd_groups(targets: Iterable[Target], labels: dict[str, str]) -> list[dict]:
    """One group per node: its addresses, with `node` and the job's selector labels."""
    by_node: dict[str, list[str]] = {}
    for t in targets:
        by_node.setdefault(t.node, []).append(t.address)
    return [
        {"targets": addresses, "labels": {**labels, "node": node}}
        for node, addresses in sorted(by_node.items())
    ]


def write_atomically(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_file_sd(directory: Path, targets: list[Target], labels: dict[str, str]) -> list[Path]:
    """training.json, gpu.json and node.json (node_exporter) in `directory`; their paths."""
    written = []
    for kind in ("training", "gpu", "node"):
        path = directory / f"{kind}.json"
        write_atomically(path, file_sd_groups([t for t in targets if t.kind == kind], labels))
        written.append(path)
    return written
