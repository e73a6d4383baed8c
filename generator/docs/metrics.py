"""docs/metrics.md: the metric table in Markdown, generated from trainsignals.metrics.catalog."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainsignals import __version__
from trainsignals.generator.artifacts.kind import ArtifactKind, Run
from trainsignals.generator.output.files import GENERATED_MARK
from trainsignals.metrics.catalog import METRICS
from trainsignals.metrics.dcgm import DCGM_METRICS
from trainsignals.metrics.gpu_exporter import THROTTLE_REASONS
from trainsignals.metrics.training import PHASES


def _table(metrics) -> list[str]:
    lines = ["| metric | type | labels | exported by | meaning |", "|---|---|---|---|---|"]
    for m in metrics:
        labels = ", ".join(f"`{label}`" for label in m.labels)
        lines.append(f"| `{m.name}` | {m.kind} | {labels} | {m.component} | {m.help} |")
    return lines


def metrics_markdown() -> str:
    lines = [
        f"<!-- {GENERATED_MARK} {__version__} from its metric catalogue. "
        "Do not edit: run `trainsignals generate`. -->",
        "# Metric table",
        "",
        "Every raw series a generated rule or dashboard panel reads, and the component that",
        "exports it. Anything else a rule reads is recorded by a rule of the same file",
        "(`level:metric:operations`). The GPU exporter and the training instrumentation",
        "implement this table; the simulator serves it; a test fails when a rule or panel",
        "reads a series that is in neither place.",
        "",
        "## Labels",
        "",
        "- Every target of a job carries the spec's `selector` labels (default",
        '  `training_job="<name>"`) and `node` as **target labels** (static or file_sd',
        "  labels, or Kubernetes relabelling), with `honor_labels: true` so the `node` the",
        "  exporters expose themselves agrees. `up` only has target labels, and the",
        "  node-down and missing-rank alerts read `up`.",
        "- The two kinds of target are told apart by the Prometheus `job` label: the spec's",
        "  `scrape_jobs.training` (default `trainsignals-training`) and `scrape_jobs.gpu`",
        "  (default `trainsignals-gpu`).",
        f"- `trainsignals_phase{{phase}}`: one of {', '.join(PHASES)}.",
        f"- `trainsignals_gpu_throttle_active{{reason}}`: one of {', '.join(THROTTLE_REASONS)}.",
        "",
        "## trainsignals' own metrics",
        "",
        *_table(METRICS),
        "",
        "## dcgm-exporter (specs with `gpu_metrics: dcgm`)",
        "",
        "The GPU recording rules translate these into the same recorded series, so alerts",
        "and dashboards do not change. dcgm-exporter labels: `Hostname` (becomes `node`), `gpu`;",
        "a MIG GPU instance's series also carry `GPU_I_ID` and `GPU_I_PROFILE`.",
        "",
        *_table(DCGM_METRICS),
        "",
    ]
    return "\n".join(lines)


class MetricsDocKind(ArtifactKind):
    """docs/metrics.md."""

    name = "docs-metrics"

    def fleet_files(self, run: Run, parts: Sequence[Any]) -> dict[str, str]:
        return {"docs/metrics.md": metrics_markdown()}
