"""Split a job's rule file into edge rules (each shard) and global rules (one ruler).

Shards partition the job's targets by `node` (hashmod), so anything computed within one node is
exact on the shard that scrapes it. The split reads each generated expression with
promql-parser (trees and the names they read: trainsignals/metrics/promql_reads.py), so it
follows the rules as they change instead of a hand-kept table:

- a recording rule whose result is node-local (every output series is computed from series of
  one node: per-node and per-GPU rules) runs on every shard unchanged ("edge" rule);
- every other rule and every alert runs on the global ruler; inside it, each aggregation that
  crosses nodes over raw series (`sum(rate(x[5m]))`, `avg(...)`, `min`, `max`, `count`, `group`)
  is pushed down: the shard records the node's partial (`sum by (node) (rate(x[5m]))`, named
  `edge:<metric>:<op>_<hash>`) and the global rule combines the partials (`sum(edge:...)`;
  `avg` as sum / count). Groupings by rank are combined globally too (`sum by (rank)` pushes
  `sum by (node, rank)`): a restarted rank can run on another node, so ranks do not partition
  by node over a window.

Partial data: a global rule that combines partials is only true while every shard reports.
Such rules (and every rule or alert reading them) get `unless on () <shards missing>`: while a
shard is silent they produce nothing (a gap, which range functions over them skip) instead of a
smaller sum, so a missing shard never reads as lost throughput or missing ranks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import promql_parser as pp

from trainsignals.generator.spec.durations import format_duration
from trainsignals.metrics.promql_reads import names, parse, selector_name, selector_names

# Labels each of which belongs to one node: an aggregation grouping by one stays node-local.
# Not `rank`: a restarted rank may run on another node (another shard) within a window, so a
# `by (rank)` grouping is combined globally (per-rank partials), as one Prometheus groups it.
NODE_LOCAL_LABELS = frozenset({"node", "instance"})
PUSHABLE = {"sum": "sum", "min": "min", "max": "max", "count": "sum", "group": "group"}
ALERT_SERIES = frozenset({"ALERTS", "ALERTS_FOR_STATE"})
SCALAR_FUNCS = frozenset({"time", "pi"})
# Functions whose result is not a per-series function of their arguments.
NON_LOCAL_FUNCS = frozenset({"vector", "scalar", "absent", "absent_over_time", "count_values"})
EDGE_LEVEL = "edge"


class ShardingError(ValueError):
    """A rule the split cannot place (it would read raw series on the global ruler)."""


@dataclass
class Pushdown:
    record: str
    expr: str
    slow_only: bool = True  # only slow-group rules read it: the shard's slow group runs it


@dataclass
class SplitState:
    recorded: set[str]  # every name a rule of the file records
    edge: set[str]  # names recorded on the shards
    pushdowns: dict[str, Pushdown] = field(default_factory=dict)  # by edge expression text


def is_raw(name: str) -> bool:
    return ":" not in name and name not in ALERT_SERIES


class _Kinds:
    """'scalar', 'local' (node-local vector) or 'global' for each expression node."""

    def __init__(self, state: SplitState) -> None:
        self.state = state

    def of(self, node: object) -> str:
        if isinstance(node, pp.NumberLiteral | pp.StringLiteral):
            return "scalar"
        if isinstance(node, pp.VectorSelector):
            name = selector_name(node)
            if name in ALERT_SERIES or (
                name in self.state.recorded and name not in self.state.edge
            ):
                return "global"
            return "local"
        if isinstance(node, pp.MatrixSelector):
            return self.of(node.vector_selector)
        if isinstance(node, pp.ParenExpr | pp.UnaryExpr | pp.SubqueryExpr):
            return self.of(node.expr)
        if isinstance(node, pp.Call):
            name = node.func.name
            if name in SCALAR_FUNCS:
                return "scalar"
            kinds = {self.of(arg) for arg in node.args}
            if name in NON_LOCAL_FUNCS or "global" in kinds:
                return "global"
            return "local" if "local" in kinds else "scalar"
        if isinstance(node, pp.AggregateExpr):
            if self.of(node.expr) == "global":
                return "global"
            return "local" if _groups_locally(node) else "global"
        if isinstance(node, pp.BinaryExpr):
            kinds = {self.of(node.lhs), self.of(node.rhs)}
            if "global" in kinds:
                return "global"
            if kinds == {"scalar"}:
                return "scalar"
            matching = node.modifier.matching if node.modifier else None
            if matching is None or "scalar" in kinds:
                return "local"
            labels = set(matching.labels)
            if matching.type == pp.LabelModifierType.Include:
                return "local" if labels & NODE_LOCAL_LABELS else "global"
            return "global" if "node" in labels else "local"
        raise ShardingError(f"unsupported PromQL node {type(node).__name__}")


def is_node_local(expr: str, state: SplitState) -> bool:
    """Whether every output series of `expr` is computed from series of one node (so it is
    exact on the shard that scrapes that node), given what `state` records where."""
    return _Kinds(state).of(parse(expr)) == "local"


def _groups_locally(node: pp.AggregateExpr) -> bool:
    modifier = node.modifier
    if modifier is None:
        return False
    labels = set(modifier.labels)
    if modifier.type == pp.AggModifierType.By:
        return bool(labels & NODE_LOCAL_LABELS)
    return "node" not in labels


def _agg_text(op: str, labels: Iterable[str] | None, inner: str, param: str = "") -> str:
    grouping = f" by ({', '.join(labels)})" if labels is not None else ""
    return f"{op}{grouping} ({param + ', ' if param else ''}{inner})"


def emit(node: object, hook: Callable[[object], str | None]) -> str:
    """PromQL text of `node`, with `hook` replacing the nodes it returns text for."""
    replaced = hook(node)
    if replaced is not None:
        return replaced
    if isinstance(node, pp.AggregateExpr):
        modifier = node.modifier
        grouping = ""
        if modifier is not None:
            word = "by" if modifier.type == pp.AggModifierType.By else "without"
            grouping = f" {word} ({', '.join(modifier.labels)})"
        param = f"{emit(node.param, hook)}, " if node.param is not None else ""
        return f"{node.op}{grouping} ({param}{emit(node.expr, hook)})"
    if isinstance(node, pp.BinaryExpr):
        modifier = f" {node.modifier}" if node.modifier and str(node.modifier) else ""
        return f"({emit(node.lhs, hook)}) {node.op}{modifier} ({emit(node.rhs, hook)})"
    if isinstance(node, pp.Call):
        return f"{node.func.name}({', '.join(emit(arg, hook) for arg in node.args)})"
    if isinstance(node, pp.ParenExpr):
        return f"({emit(node.expr, hook)})"
    if isinstance(node, pp.UnaryExpr):
        return f"-({emit(node.expr, hook)})"
    if isinstance(node, pp.StringLiteral):
        return json.dumps(node.val)  # str() leaves inner quotes unescaped
    if isinstance(node, pp.SubqueryExpr):
        step = format_duration(node.step.total_seconds()) if node.step else ""
        offset = f" offset {format_duration(node.offset.total_seconds())}" if node.offset else ""
        window = format_duration(node.range.total_seconds())
        return f"({emit(node.expr, hook)})[{window}:{step}]{offset}"
    return str(node)


def edge_text(node: object) -> str:
    """`node` as a shard evaluates it: every `by` grouping keeps `node`."""

    def hook(n: object) -> str | None:
        modifier = getattr(n, "modifier", None)
        if (
            isinstance(n, pp.AggregateExpr)
            and modifier is not None
            and modifier.type == pp.AggModifierType.By
            and "node" not in modifier.labels
        ):
            param = emit(n.param, hook) if n.param is not None else ""
            return _agg_text(str(n.op), ["node", *modifier.labels], emit(n.expr, hook), param)
        return None

    return emit(node, hook)


@dataclass
class Rewrite:
    text: str
    partial: bool  # combines partials of several shards: wrong while a shard is missing


def _edge_name(node: object, op: str, text: str) -> str:
    metric = next((n for n in selector_names(node) if is_raw(n) and n), "series")
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{EDGE_LEVEL}:{metric}:{op}_{digest}"


def rewrite_global(expr: str, state: SplitState, job: str, slow: bool) -> Rewrite:
    """The global form of `expr`: raw reads replaced by combined shard partials."""
    kinds = _Kinds(state)
    partial = False
    selector = "{" + f'training_job="{job}"' + "}"

    def push(node: object, op: str, text: str) -> str:
        key = f"{op}|{text}"
        if key not in state.pushdowns:
            state.pushdowns[key] = Pushdown(_edge_name(node, op, text), text)
        pushdown = state.pushdowns[key]
        pushdown.slow_only &= slow
        return pushdown.record + selector

    def hook(node: object) -> str | None:
        nonlocal partial
        if not any(is_raw(n) for n in selector_names(node)):
            if isinstance(node, pp.AggregateExpr) and kinds.of(node) == "global":
                partial |= any(n in state.edge for n in selector_names(node))
            return None  # emit() prints it (str() misprints subqueries and quoted strings)
        kind = kinds.of(node)
        if isinstance(node, pp.MatrixSelector):
            raise ShardingError(f"a range over raw series outside an aggregation: {node}")
        if kind == "local":
            # A node-local part (a per-node expression inside a job-level rule): the shard
            # records it whole, with its labels.
            return push(node, "local", edge_text(node))
        if (
            isinstance(node, pp.AggregateExpr)
            and kinds.of(node.expr) != "global"
            and (str(node.op) in PUSHABLE or str(node.op) == "avg")
        ):
            partial = True
            op = str(node.op)
            if node.modifier is not None and node.modifier.type != pp.AggModifierType.By:
                return None  # `without` over nodes: no partial form here
            labels = list(node.modifier.labels) if node.modifier is not None else []
            inner = edge_text(node.expr)
            grouped = ", ".join(labels)
            by = f" by ({grouped})" if labels else ""
            if op == "avg":
                total = push(node, "sum", _agg_text("sum", ["node", *labels], inner))
                count = push(node, "count", _agg_text("count", ["node", *labels], inner))
                return f"(sum{by} ({total}) / sum{by} ({count}))"
            part = push(node, op, _agg_text(op, ["node", *labels], inner))
            return f"{PUSHABLE[op]}{by} ({part})"
        return None

    text = emit(parse(expr), hook)
    leftover = sorted(n for n in names(text) if is_raw(n))
    if leftover:
        raise ShardingError(f"would read raw series {leftover} on the global ruler")
    return Rewrite(text, partial)


def edge_names(rules: list[dict], recorded: set[str]) -> set[str]:
    """Recorded names every rule of which is node-local: they run on the shards."""
    edge = set(recorded)
    while True:
        state = SplitState(recorded, edge)
        bad = {r["record"] for r in rules if "record" in r and not is_node_local(r["expr"], state)}
        if not bad & edge:
            return edge
        edge -= bad
