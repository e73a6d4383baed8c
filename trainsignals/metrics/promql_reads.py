"""Which series a PromQL expression reads: the one answer the generator, lint and readiness use.

Every answer comes from promql-parser's parse tree. Parsing is the cost (a Python object per
node: ~45 µs for a typical rule, a few hundred expressions per job), and jobs of one shape have
the same expressions but for their string literals (the job name in every selector) and their
thresholds and windows. So an expression is parsed as a *template* (its string literals
replaced by placeholders, its numbers and windows normalised: this changes nothing it reads)
into a small summary of what it reads, cached by template, and each job's literals are put
back into that summary. Asking several questions about one text costs one regex pass (the
last texts asked are memoised too).

- `names`: the metric names an expression's selectors read;
- `selectors`: every vector selector, with its matchers;
- `firm_inputs`: the raw selectors it cannot do without, through recording rules (`or`, `unless`);
- `parse` and `selector_names`: the memoised tree and the names under one of its nodes, for
  callers that place or rewrite parts of an expression (the sharded split).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

import promql_parser


class PromQLError(ValueError):
    """An expression promql-parser refuses; the message names the expression."""


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.label}{self.op}{json.dumps(self.value)}"


Input = tuple[str, tuple[Matcher, ...]]  # (metric name, matchers other than the name, sorted)

# promql_parser.MatchOp is not hashable: key by its name.
_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_REGEX_OPS = frozenset({"=~", "!~"})
# PromQL's string literals: placeholders in a template (a job's name and label values).
# (Unrolled, `"[^"\\]*(?:\\.[^"\\]*)*"` for `"(?:[^"\\]|\\.)*"`: the same literals, the
# characters between escapes matched in one step rather than an alternation each.)
_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"' r"|'[^'\\\n]*(?:\\.[^'\\\n]*)*'" r"|`[^`]*`")
# Thresholds and windows never change what is read: a new template is normalised (to 1 and
# 1m) before it is parsed, so jobs that differ only there share a parse. Only forms that stay
# valid are normalised (a number after an operator, `(` or `,`; a range or subquery of
# one-unit durations); the rest stays as written: a parse more at worst. (Numbers after `bool`
# stay: matching the word doubled the cost of the scan.)
_DURATION = r"[1-9]\d{0,5}(?:ms|[smhdwy])"
_RANGE = re.compile(rf"\[\s*{_DURATION}\s*\]")
_SUBQUERY = re.compile(rf"\[\s*{_DURATION}\s*:\s*(?:{_DURATION})?\s*\]")
_NUMBER = re.compile(r"([-+*/%^<>=!(,]\s*)\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.:\[\]])")
_PLACEHOLDER = re.compile(r"__trainsignals_literal_(\d+)__")


@lru_cache(maxsize=512)
def parse(expr: str) -> promql_parser.Expr:
    """The parse tree of `expr`, memoised (bounded: the sharded split of one job asks for ~200
    texts, several times each). Shared: not to be changed."""
    return _parse(expr)


def _parse(expr: str) -> promql_parser.Expr:
    try:
        return promql_parser.parse(expr)
    except ValueError as error:
        raise PromQLError(f"not PromQL ({error}): {expr}") from None


def vector_selector(node: promql_parser.VectorSelector) -> Input:
    """(metric name, matchers other than the name, sorted) of one parsed vector selector. The
    name is the `__name__` matcher's value where the selector has no name before its braces."""
    matchers = [
        Matcher(m.name, _op(m), m.value) for m in node.matchers.matchers if m.name != "__name__"
    ]
    return selector_name(node), tuple(sorted(matchers, key=str))


def selector_names(node: object) -> Iterator[str]:
    """The metric name of every vector selector under a parsed `node`, in the order of the
    text ("" for a selector without one)."""
    if isinstance(node, promql_parser.VectorSelector):
        yield selector_name(node)
        return
    for child in _children(node):
        yield from selector_names(child)


def names(expr: str) -> frozenset[str]:
    """The metric names `expr` reads (its vector selectors' names; not the records' inputs)."""
    template, literals = _analysed(expr)
    if not template.name_slots:
        return template.names
    return template.names | {literals[slot] for slot in template.name_slots}


def selectors(expr: str) -> tuple[Input, ...]:
    """(metric name, matchers other than the name) of every vector selector in `expr`."""
    template, literals = _analysed(expr)
    return tuple(selector.filled(literals) for selector in template.every)


def reads_any_name(expr: str) -> bool:
    """Whether a selector of `expr` picks series by a pattern on their name (`__name__=~`,
    `!=`, `!~`) or by labels alone: what it reads is not known from names."""
    return _analysed(expr)[0].any_name


def record_names(rules: Iterable[dict]) -> dict[str, set[str]]:
    """{record name: the names read by every rule recording it} of recording rules."""
    found: dict[str, set[str]] = {}
    for rule in rules:
        found.setdefault(rule["record"], set()).update(names(rule["expr"]))
    return found


def records_read(found: set[str], read: Mapping[str, set[str]]) -> set[str]:
    """The records among the names `found` and those they read, transitively (`read`:
    record_names). A cycle of records ends, reading them all."""
    pending = [*found & read.keys()]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending += read[name] & read.keys()
    return seen


def firm_inputs(
    expr: str, records: Mapping[str, tuple[str, ...]], memo: dict[str, frozenset] | None = None
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
        template, literals = _analysed(text)
        return resolve(template.firm, literals)

    def resolve(firm: _Firm, literals: tuple[str, ...]) -> frozenset[Input]:
        found: set[Input] = set()
        for selector in firm.selectors:
            name, matchers = selector.filled(literals)
            if name in records:
                found |= of_record(name)
            elif name:
                found.add((name, matchers))
        for a, b in firm.either:
            found |= resolve(a, literals) & resolve(b, literals)
        return frozenset(found)

    return of_expr(expr)


# --- templates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Selector:
    """A selector of a template; `*_slot`: which literal goes where a placeholder is."""

    name: str
    name_slot: int | None
    matchers: tuple[Matcher, ...]
    value_slots: tuple[int | None, ...]  # per matcher
    any_name: bool  # a pattern on the name, or none: what it reads is not known from names

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
class _Firm:
    """What a (sub-)template cannot do without: every selector of `selectors`, and of each
    `(a, b)` of `either` (an `a or b`) only what both need. `a unless b` contributes `a` alone."""

    selectors: tuple[_Selector, ...]
    either: tuple[tuple[_Firm, _Firm], ...]


@dataclass(frozen=True)
class _Template:
    every: tuple[_Selector, ...]  # every vector selector, in the order of the text
    firm: _Firm
    names: frozenset[str]  # the selectors' names that are not literals ("" left out)
    name_slots: tuple[int, ...]  # the literals that are names (`{__name__="x"}`)
    regex_slots: tuple[int, ...]  # the literals that are regular expressions
    any_name: bool  # a selector picks names by a pattern, or any name


@lru_cache(maxsize=512)
def _analysed(expr: str) -> tuple[_Template, tuple[str, ...]]:
    """The template of `expr` and its literals. Bounded: the questions about one text come
    while one job is generated (~150 texts); a longer memory only holds more memory."""
    template, literals = _template(expr)
    try:
        compiled = _compiled(template)
    except PromQLError:  # a placeholder the grammar refuses there: the text as it is
        return _summary(expr), ()
    for slot in compiled.regex_slots:  # the template parsed a placeholder, not the pattern
        if not _valid_regex(literals[slot]):
            _parse(expr)  # raises, naming the expression
    return compiled, literals


def _template(expr: str) -> tuple[str, tuple[str, ...]]:
    """`expr` with its string literals as numbered placeholders, and the literals' values.
    A string with an escape stays in the template (a rare cache miss rather than a second
    implementation of PromQL's unquoting)."""
    # Split in C (the literals at odd indices) rather than a Python call per literal: a
    # job's expressions are all new texts (its name in every selector), ~800 literals.
    if "\\" in expr:
        return _template_with_escapes(expr)
    pieces = _STRING_PIECES.split(expr)
    quoted = pieces[1::2]
    while len(_PLACEHOLDERS) < len(quoted):
        _PLACEHOLDERS.append(f'"__trainsignals_literal_{len(_PLACEHOLDERS)}__"')
    pieces[1::2] = _PLACEHOLDERS[: len(quoted)]
    return "".join(pieces), tuple(text[1:-1] for text in quoted)


_PLACEHOLDERS: list[str] = []  # each slot's, in order (_template)
_STRING_PIECES = re.compile(f"({_STRING.pattern})")  # one group: re.split keeps the literals


def _template_with_escapes(expr: str) -> tuple[str, tuple[str, ...]]:
    """_template of an expression with a backslash: a string with an escape stays as written."""
    literals: list[str] = []

    def swap(match: re.Match[str]) -> str:
        text = match.group()
        if "\\" in text:
            return text
        literals.append(text[1:-1])
        return f'"__trainsignals_literal_{len(literals) - 1}__"'

    return _STRING.sub(swap, expr), tuple(literals)


def _normalised(template: str) -> str:
    """`template` with its numbers and windows normalised (_NUMBER, _RANGE, _SUBQUERY); as it
    is where a string stayed in it (an escape), whose text must not change."""
    if "\\" in template:
        return template
    return _NUMBER.sub(r"\g<1>1", _RANGE.sub("[1m]", _SUBQUERY.sub("[1m:1m]", template)))


@lru_cache(maxsize=1024)
def _valid_regex(value: str) -> bool:
    """Whether promql-parser accepts `value` (a literal without escapes) as a matcher's regex."""
    quote = next(q for q in ('"', "'", "`") if q not in value)
    try:
        promql_parser.parse(f"x{{x=~{quote}{value}{quote}}}")
    except ValueError:
        return False
    return True


@lru_cache(maxsize=8192)
def _compiled(template: str) -> _Template:
    """What a template reads. Bounded: ~300 templates per job shape. A template first seen is
    normalised before it is parsed: jobs that differ only in thresholds and windows share the
    parse (_summary), and jobs of one shape do not pay for the normalising scan."""
    normal = _normalised(template)
    if normal != template:
        try:
            return _summary(normal)
        except PromQLError:  # a normalised value the grammar refuses there
            pass
    return _summary(template)


@lru_cache(maxsize=8192)
def _summary(template: str) -> _Template:
    """What a (normalised) template reads, from its parse tree."""
    every: list[_Selector] = []
    firm = _collect(_parse(template), every)
    regex_slots = tuple(
        slot
        for s in every
        for m, slot in zip(s.matchers, s.value_slots, strict=True)
        if slot is not None and m.op in _REGEX_OPS
    )
    return _Template(
        every=tuple(every),
        firm=firm,
        names=frozenset(s.name for s in every if s.name_slot is None and s.name),
        name_slots=tuple(s.name_slot for s in every if s.name_slot is not None),
        regex_slots=regex_slots,
        any_name=any(s.any_name for s in every),
    )


def _collect(node: object, every: list[_Selector]) -> _Firm:
    """The _Firm of `node`; appends each selector under it to `every`."""
    selectors: list[_Selector] = []
    either: list[tuple[_Firm, _Firm]] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name, matchers = vector_selector(node)
            slots = tuple(_slot(m.value) for m in matchers)
            selector = _Selector(name, _slot(name), matchers, slots, _any_name(node))
            selectors.append(selector)
            every.append(selector)
        elif isinstance(node, promql_parser.BinaryExpr):
            op = str(node.op).lower()
            if op == "or":
                either.append((_collect(node.lhs, every), _collect(node.rhs, every)))
            elif op == "unless":
                visit(node.lhs)
                _collect(node.rhs, every)  # read, but not needed
            else:
                visit(node.lhs)
                visit(node.rhs)
        else:
            for child in _children(node):
                visit(child)

    visit(node)
    return _Firm(tuple(selectors), tuple(either))


def _any_name(node: promql_parser.VectorSelector) -> bool:
    """Whether a selector's name is not fixed: none, or a `__name__` matcher other than `=`."""
    return not node.name and not any(
        m.name == "__name__" and _op(m) == "=" for m in node.matchers.matchers
    )


def _op(matcher: promql_parser.Matcher) -> str:
    return _OPS[str(matcher.op).rsplit(".", 1)[-1]]


def selector_name(node: promql_parser.VectorSelector) -> str:
    """The metric name of a parsed selector: before its braces, or its `__name__` matcher's
    value ("" where it has neither)."""
    if node.name:
        return node.name
    return next((m.value for m in node.matchers.matchers if m.name == "__name__"), "")


def _slot(text: str) -> int | None:
    found = _PLACEHOLDER.fullmatch(text)
    return int(found.group(1)) if found else None


def _children(node: object) -> list:
    """The sub-expressions of a node other than a selector, by type, in the order of the text:
    asking a node for an attribute it lacks raises inside the Rust binding, slowly."""
    if isinstance(node, promql_parser.BinaryExpr):
        children = [node.lhs, node.rhs]
    elif isinstance(node, promql_parser.Call):
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
