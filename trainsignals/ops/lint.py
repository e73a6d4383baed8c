"""Rule hygiene on generated (or hand-edited) Prometheus rule files.

`lint_rules` takes parsed rule documents and returns one line per problem,
`<file>: <rule>: <problem>; <fix>`, so a CI log says what is wrong and what to do about it.
The generator should never produce a problem here; the lint guards hand edits, generator
regressions and rule files that other tools wrote.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from trainsignals.metrics.catalog import known_series_names
from trainsignals.metrics.promql_reads import names

REQUIRED_LABELS = ("severity", "team", "job")
REQUIRED_ANNOTATIONS = ("summary", "description", "runbook_url", "dashboard_url")
SEVERITIES = ("page", "ticket")

RECORD_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+$")
RANGE = re.compile(r"\[[^\]]+\]")
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
DURATION_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads, as the parser sees its vector selectors
    (trainsignals/metrics/promql_reads.py: the one answer readiness and the generator use).
    Raises ValueError when `expr` is not PromQL."""
    return set(names(expr))


def duration_seconds(text: object) -> float:
    """Seconds in a Prometheus duration ("1h30m"); 0 for anything unparseable."""
    parts = DURATION_PART.findall(str(text or ""))
    return sum(float(n) * DURATION_SECONDS[u] for n, u in parts)


def has_burn_rate_windows(expr: str) -> bool:
    """Multi-window burn-rate shape: two range windows on either side of an `and`."""
    sides = re.split(r"\band\b", expr)
    return sum(1 for side in sides if RANGE.search(side)) >= 2


@dataclass(frozen=True)
class Rule:
    file: str
    body: dict

    @property
    def name(self) -> str:
        return str(self.body.get("alert") or self.body.get("record") or "?")

    @property
    def labels(self) -> dict:
        return self.body.get("labels") or {}

    @property
    def expr(self) -> str:
        return str(self.body.get("expr", ""))

    def problem(self, what: str, fix: str) -> str:
        return f"{self.file}: {self.name}: {what}; {fix}"


def iter_rules(documents: dict[str, dict]) -> Iterator[Rule]:
    for file, document in sorted(documents.items()):
        for group in (document or {}).get("groups") or []:
            for body in group.get("rules") or []:
                yield Rule(file, body)


def lint_rules(documents: dict[str, dict]) -> list[str]:
    """Every hygiene problem in these rule documents ({file name: parsed YAML})."""
    rules = list(iter_rules(documents))
    alerts = [r for r in rules if "alert" in r.body]
    recorded = {str(r.body["record"]) for r in rules if "record" in r.body}
    known = known_series_names() | recorded
    problems = [p for file, doc in sorted(documents.items()) for p in _document_problems(file, doc)]
    for rule in rules:
        if "record" in rule.body:
            problems += _record_problems(rule)
        else:
            problems += _alert_problems(rule)
        problems += _unknown_metric_problems(rule, known)
    problems += _duplicate_problems(alerts)
    return sorted(problems)


def _document_problems(file: str, document: dict) -> list[str]:
    if not isinstance(document, dict) or not document.get("groups"):
        return [f"{file}: -: no rule groups; regenerate it with `trainsignals generate`"]
    return []


def _alert_problems(rule: Rule) -> list[str]:
    problems = []
    for label in REQUIRED_LABELS:
        if not rule.labels.get(label):
            problems.append(rule.problem(f"label {label} missing", f"add labels.{label}"))
    severity = rule.labels.get("severity")
    # The always-firing heartbeat (generator/meta/rules.py) notifies a dead man's switch, nobody;
    # it may stop while page notifications fail (`vector(1) unless on () ALERTS{...}`).
    heartbeat = severity == "none" and rule.expr.strip().startswith("vector(1)")
    if severity and severity not in SEVERITIES and not heartbeat:
        problems.append(
            rule.problem(f"severity {severity!r} is not page or ticket", "set page or ticket")
        )
    annotations = rule.body.get("annotations") or {}
    for name in REQUIRED_ANNOTATIONS:
        if not annotations.get(name):
            problems.append(rule.problem(f"annotation {name} missing", f"add annotations.{name}"))
    if (
        severity == "page"
        and duration_seconds(rule.body.get("for")) <= 0
        and not has_burn_rate_windows(rule.expr)
    ):
        problems.append(
            rule.problem(
                "page without `for` or burn-rate windows flaps on one bad sample",
                "add `for` (> 0) or a multi-window burn-rate expr",
            )
        )
    return problems


def _record_problems(rule: Rule) -> list[str]:
    if RECORD_NAME.match(rule.name):
        return []
    return [
        rule.problem(
            "recording rule name is not level:metric:operations",
            "rename it, e.g. job:trainsignals_tokens:rate5m",
        )
    ]


def _unknown_metric_problems(rule: Rule, known: frozenset[str] | set[str]) -> list[str]:
    try:
        unknown = sorted(metric_names(rule.expr) - known)
    except ValueError as exc:
        return [rule.problem(f"expression does not parse ({exc})", "fix the PromQL")]
    if not unknown:
        return []
    return [
        rule.problem(
            f"reads {', '.join(unknown)}, which nothing exports or records",
            "fix the name or record it (trainsignals' metric catalogue: docs/metrics.md)",
        )
    ]


def _duplicate_problems(alerts: list[Rule]) -> list[str]:
    problems = []
    first_by_body: dict[str, Rule] = {}
    first_by_name: dict[tuple[str, str], Rule] = {}
    for rule in alerts:
        # `job` label, not file, is what Alertmanager sees: two files can feed one job.
        job = str(rule.labels.get("job") or rule.file)
        named = first_by_name.setdefault((job, rule.name), rule)
        if named is not rule:
            problems.append(
                rule.problem(
                    f"alert name repeats in job {job} (also in {named.file})",
                    "give each alert of a job its own name",
                )
            )
        identity = json.dumps(
            [rule.expr, str(rule.body.get("for", "")), rule.labels], sort_keys=True
        )
        same = first_by_body.setdefault(identity, rule)
        if same is not rule:
            problems.append(
                rule.problem(
                    f"identical to {same.file}: {same.name} (same expr, for and labels)",
                    "delete one of them",
                )
            )
    return problems


def rule_files(paths: Iterable[Path]) -> list[Path]:
    """Rule files named by `paths`: files as given, folders' `*.rules.yaml`."""
    found: list[Path] = []
    for path in paths:
        found += sorted(path.glob("*.rules.yaml")) if path.is_dir() else [path]
    return found


def load_documents(files: Iterable[Path]) -> dict[str, dict]:
    return {f.as_posix(): yaml.safe_load(f.read_text(encoding="utf-8")) for f in files}


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
def lint_command(paths: tuple[Path, ...]) -> None:
    """Rule hygiene: labels, annotations, page `for`, metric names, duplicates, record names.

    PATHS are rule files or folders of `*.rules.yaml` (default: alerts/).
    """
    files = rule_files(paths or (Path("alerts"),))
    if not files:
        raise click.ClickException("no *.rules.yaml found; run `trainsignals generate` first")
    problems = lint_rules(load_documents(files))
    for line in problems:
        click.echo(line, err=True)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {len(files)} rule file(s)", err=True)
        raise SystemExit(1)
    click.echo(f"{len(files)} rule file(s) clean")
