"""Why a selector the rules read matches nothing on a live Prometheus.

The usual silent failure of a new setup: a target label or a scrape job named differently
from what the rules match on, so the rule reads nothing and its alert can never fire.
`diagnose` asks Prometheus, one matcher at a time, which label breaks the match and what the
targets carry. The selectors come from trainsignals/metrics/series_check.py.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from trainsignals.metrics.catalog import BY_NAME
from trainsignals.metrics.promql_reads import Matcher
from trainsignals.metrics.series_check import Selector
from trainsignals.ops.query import Prometheus


class PrometheusClient(Prometheus):
    """The query client (trainsignals/ops/query.py) with the label questions readiness asks."""

    def count(self, selector: str) -> int:
        result = self.vector(f"count({selector})")
        return int(float(result[0]["value"][1])) if result else 0

    def label_values(self, label: str, selector: str) -> list[str]:
        """Values of `label` on the series `selector` matches ("" where they lack it)."""
        result = self.vector(f"count by ({label}) ({selector})")
        return sorted(item["metric"].get(label, "") for item in result)


@dataclass(frozen=True)
class Missing:
    """Why a selector matches nothing: the broken matchers and what the series carry."""

    selector: Selector
    problem: str
    fix: str


def _label_fix(
    matcher: Matcher, values: list[str], job: str, selector_labels: dict[str, str]
) -> tuple[str, str]:
    """(problem, fix) for a matcher no series satisfies."""
    present = [v for v in values if v]
    closest = difflib.get_close_matches(matcher.value, present, n=1, cutoff=0.5)
    carry = (
        f"the series carry {matcher.label}={json.dumps(closest[0])}"
        if closest
        else f"the series carry {matcher.label} in {present[:5]}"
        if present
        else f"no series carries a {matcher.label} label"
    )
    problem = f"label {matcher.label}: the rules match {matcher}, {carry}"
    if matcher.label == "job":
        fix = (
            f"name the Prometheus scrape job {json.dumps(matcher.value)}, or set "
            f"scrape_jobs in jobs/{job}.yaml to the scrape job's name"
        )
    elif matcher.label in selector_labels:
        fix = (
            f"give the targets the label {matcher.label}={json.dumps(matcher.value)} "
            f"(file_sd/static labels or relabel_configs), or set selector in jobs/{job}.yaml "
            "to what they carry"
        )
    else:
        fix = f"make the exporter set {matcher.label}, or fix the matcher {matcher}"
    return problem, fix


def diagnose(
    prom: PrometheusClient, selector: Selector, job: str, selector_labels: dict[str, str]
) -> Missing | None:
    """None when the selector matches series, else which label (or exporter) is wrong."""
    if prom.count(selector.text()) > 0:
        return None
    if prom.count(selector.name) == 0:
        metric = BY_NAME.get(selector.name)
        source = metric.component if metric else "its exporter"
        return Missing(
            selector,
            f"no series named {selector.name} at all",
            f"make sure {source} runs and Prometheus scrapes it",
        )
    # Selector labels first: once the job's own series are isolated, the next matcher
    # that empties the result is the broken one.
    ordered = sorted(selector.matchers, key=lambda m: (m.label not in selector_labels, str(m)))
    kept: list[Matcher] = []
    problems, fixes = [], []
    for matcher in ordered:
        if prom.count(selector.text([*kept, matcher])) > 0:
            kept.append(matcher)
            continue
        values = prom.label_values(matcher.label, selector.text(kept))
        problem, fix = _label_fix(matcher, values, job, selector_labels)
        problems.append(problem)
        fixes.append(fix)
    if not problems:  # each matcher alone matches; together they do not
        problems.append(f"no series matches all of {selector.text()} at once")
        fixes.append("compare the labels of the series with the selector")
    return Missing(selector, "; ".join(problems), "; ".join(fixes))
