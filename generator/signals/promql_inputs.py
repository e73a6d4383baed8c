"""The raw series a PromQL expression cannot do without, directly or through recording rules.

Parsing is the cost (promql-parser builds a Python object per node: ~45 µs for a typical rule,
~100 expressions per job), and jobs of one shape have the same expressions but for their
string literals: the job name in every selector. So an expression is parsed as a *template*
(its string literals replaced by placeholders, which changes nothing it reads) into a small
tree of what it reads, cached by template, and each job's literals are put back into that
tree. The first job of a shape pays the parsing, a job with other thresholds or windows
parses the expressions that carry them, and every other expression costs a regex pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import promql_parser

from trainsignals.metrics.series_check import Matcher, vector_selector

Input = tuple[str, tuple[Matcher, ...]]  # (metric name, matchers other than the name, sorted)

# PromQL's string literals. Numbers (thresholds) and durations (windows) stay in the template:
# jobs that differ there parse their own, and scanning for them costs more than it saves.
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"' r"|'(?:[^'\\\n]|\\.)*'" r"|`[^`]*`")
_PLACEHOLDER = re.compile(r"__trainsignals_literal_(\d+)__")


@dataclass(frozen=True)
class _Selector:
    """A selector of a template; `*_slot`: which literal goes where a placeholder is."""

    name: str
    name_slot: int | None
    matchers: tuple[Matcher, ...]
    value_slots: tuple[int | None, ...]  # per matcher

    def filled(self, literals: tuple[str, ...]) -> Input:
        """(name, matchers) with the job's literals back in place, in vector_selector's order."""
        if self.name_slot is None and not any(s is not None for s in self.value_slots):
            return self.name, self.matchers
        name = self.name if self.name_slot is None else literals[self.name_slot]
        matchers = tuple(
            m if slot is None else Matcher(m.label, m.op, literals[slot])
            for m, slot in zip(self.matchers, self.value_slots, strict=True)
        )
        # Sorted by text, the order depends on the values only where a label and operator
        # repeat (`node!="", node!="node-3"`); otherwise the template's order is the order.
        if len({(m.label, m.op) for m in matchers}) < len(matchers):
            matchers = tuple(sorted(matchers, key=str))
        return name, matchers


@dataclass(frozen=True)
class _Reads:
    """What a template reads: every selector of `selectors`, and of each `(a, b)` of
    `either` (an `a or b`) only what both read. `a unless b` contributes `a` alone."""

    selectors: tuple[_Selector, ...]
    either: tuple[tuple[_Reads, _Reads], ...]


def firm_inputs(
    expr: str, records: dict[str, tuple[str, ...]], memo: dict[str, frozenset] | None = None
) -> frozenset[Input]:
    """(name, matchers) of the raw selectors `expr` cannot do without, directly or through
    the recording rules it reads ({record name: every expression recording it}; a reader of
    the name needs what each of them reads): of `a or b` only what both sides read
    (each side is a fallback for the other, as `x or vector(0)`, or dcgm-exporter's optional
    throttle reasons or SM clocks), of `a unless b` only what `a` reads (`b` absent is normal).

    `memo`: what each of `records` reads, shared by calls with the same `records` (every
    alert of a job reads the same recording rules: each is resolved once per job, not per alert).
    """
    memo = {} if memo is None else memo

    def of_record(name: str) -> frozenset[Input]:
        if name not in memo:
            memo[name] = frozenset()  # a cycle reads nothing more
            memo[name] = frozenset().union(*map(of_expr, records[name]))
        return memo[name]

    def of_expr(text: str) -> frozenset[Input]:
        template, literals = _template(text)
        try:
            reads = _compiled(template)
        except ValueError:  # a placeholder the grammar refuses there: the text as it is
            reads, literals = _compiled(text), ()
        return resolve(reads, literals)

    def resolve(reads: _Reads, literals: tuple[str, ...]) -> frozenset[Input]:
        found: set[Input] = set()
        for selector in reads.selectors:
            name, matchers = selector.filled(literals)
            if name in records:
                found |= of_record(name)
            elif name:
                found.add((name, matchers))
        for a, b in reads.either:
            found |= resolve(a, literals) & resolve(b, literals)
        return frozenset(found)

    return of_expr(expr)


def _template(expr: str) -> tuple[str, tuple[str, ...]]:
    """`expr` with its string literals as numbered placeholders, and the literals' values.
    A string with an escape stays in the template (a rare cache miss rather than a second
    implementation of PromQL's unquoting)."""
    literals: list[str] = []

    def swap(match: re.Match[str]) -> str:
        text = match.group()
        if "\\" in text:
            return text
        literals.append(text[1:-1])
        return f'"__trainsignals_literal_{len(literals) - 1}__"'

    return _STRING.sub(swap, expr), tuple(literals)


@lru_cache(maxsize=8192)
def _compiled(template: str) -> _Reads:
    """What a template reads, from its parse tree. Bounded: ~100 templates per job shape."""
    selectors: list[_Selector] = []
    either: list[tuple[_Reads, _Reads]] = []
    _collect(promql_parser.parse(template), selectors, either)
    return _Reads(tuple(selectors), tuple(either))


def _collect(node: object, selectors: list[_Selector], either: list) -> None:
    """Adds what `node` reads to the lists of the _Reads being built."""
    if isinstance(node, promql_parser.VectorSelector):
        name, matchers = vector_selector(node)
        selectors.append(
            _Selector(name, _slot(name), matchers, tuple(_slot(m.value) for m in matchers))
        )
    elif isinstance(node, promql_parser.BinaryExpr) and str(node.op).lower() == "or":
        sides = []
        for side in (node.lhs, node.rhs):
            side_selectors: list[_Selector] = []
            side_either: list = []
            _collect(side, side_selectors, side_either)
            sides.append(_Reads(tuple(side_selectors), tuple(side_either)))
        either.append((sides[0], sides[1]))
    elif isinstance(node, promql_parser.BinaryExpr):
        _collect(node.lhs, selectors, either)
        if str(node.op).lower() != "unless":
            _collect(node.rhs, selectors, either)
    else:
        for child in _children(node):
            _collect(child, selectors, either)


def _slot(text: str) -> int | None:
    found = _PLACEHOLDER.fullmatch(text)
    return int(found.group(1)) if found else None


def _children(node: object) -> list:
    """The sub-expressions of a node other than a selector or a binary expression, by type:
    asking a node for an attribute it lacks raises inside the Rust binding, slowly."""
    if isinstance(node, promql_parser.Call):
        children = list(node.args or ())
    elif isinstance(node, promql_parser.AggregateExpr):
        children = [node.expr, node.param]
    elif isinstance(node, promql_parser.MatrixSelector):
        children = [node.vector_selector]
    elif isinstance(
        node, (promql_parser.ParenExpr, promql_parser.UnaryExpr, promql_parser.SubqueryExpr)
    ):
        children = [node.expr]
    else:
        children = []  # literals
    return [c for c in children if c is not None and not isinstance(c, (str, int, float))]
