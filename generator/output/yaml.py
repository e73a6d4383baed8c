"""Deterministic, review-friendly YAML: insertion order kept, no aliases, no line wrapping."""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import Resolver

# libyaml's emitter is ~10x faster than the pure-Python one and writes the same text.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_WIDTH = 10_000


class _Dumper(_Base):
    def ignore_aliases(self, data: object) -> bool:
        return True

    def represent_data(self, data: object) -> yaml.Node:
        # The generated files are dicts, lists and strings all the way down: their nodes are
        # built here directly, as _str and PyYAML's dict and list representers (flow style off)
        # would, without the per-object type and alias bookkeeping. Anything else as before.
        kind = type(data)
        if kind is str:
            return ScalarNode(_STR, data, style="|" if "\n" in data else None)
        if kind is dict:
            pairs = [(self.represent_data(k), self.represent_data(v)) for k, v in data.items()]
            return MappingNode(_MAP, pairs, flow_style=False)
        if kind is list or kind is tuple:
            return SequenceNode(_SEQ, [self.represent_data(v) for v in data], flow_style=False)
        return super().represent_data(data)

    def resolve(self, kind: type, value: object, implicit: tuple[bool, bool]) -> str:
        # A string whose first character starts no implicit type (bool, int, float, null...)
        # is a plain string: what Resolver.resolve returns after finding no resolver for it.
        if kind is ScalarNode and value and value[0] not in self.yaml_implicit_resolvers:
            return _STR
        return super().resolve(kind, value, implicit)


def _str(dumper: _Base, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(tuple, lambda d, v: d.represent_list(list(v)))
assert None not in _Dumper.yaml_implicit_resolvers and not _Dumper.yaml_path_resolvers


def dump(data: object, header: str = "") -> str:
    body = _block_yaml(data)
    if body is None:  # something the direct writer leaves to libyaml
        body = yaml.dump(
            data,
            Dumper=_Dumper,
            sort_keys=False,
            width=_WIDTH,
            allow_unicode=True,
            default_flow_style=False,
        )
    return header + body


# The direct writer. A job's rules and test files (dicts, lists, one-line strings, numbers) in
# the text libyaml writes for them, without libyaml: its Python side builds a node per value
# and resolves each scalar twice, ~3 us per value (40 ms of a 450 KB test file). Whatever it
# is not sure to write as libyaml does (a line break, a tab or non-ASCII character, a long
# quoted string, a key that is not plain, a float or any other type) sends the whole document
# to libyaml. tests/test_yaml_out.py compares both on the example specs' rules and test files
# and on random documents of awkward strings.


class _Unsupported(Exception):
    """The document holds something only libyaml writes."""


class _Memo(dict[str, str]):
    """A string -> its scalar text; `key_heads`: a mapping key -> "key:". Both follow from the
    string alone, so one memo serves every document: the same series, encodings and labels
    recur in test after test and spec after spec, and telling how to write a string the first
    time (~5 us: a regex per implicit type) was half the cost of a test file."""

    def __init__(self) -> None:
        super().__init__()
        self.key_heads: dict[str, str] = {}
        # Per indent of a sequence, per key of its items' mappings: _sequence's line starts.
        self.item_heads: dict[str, dict[object, tuple[str, str, int]]] = {}


_MEMO = _Memo()
_MEMO_MAX = 50_000  # strings; emptied past it (a spec adds a few hundred new ones)


def _shared_memo() -> _Memo:
    if len(_MEMO) + len(_MEMO.key_heads) > _MEMO_MAX:
        _MEMO.clear()
        _MEMO.key_heads.clear()
        _MEMO.item_heads.clear()
    return _MEMO


_RESOLVER = Resolver()
_IMPLICIT_FIRST = frozenset(_RESOLVER.yaml_implicit_resolvers)
assert None not in _IMPLICIT_FIRST  # (no resolver for any first character)
# Past a number's first characters every implicit type is a word of at most MAX_WORD
# characters (bool's "false", null's "null", merge's "<<": tests/test_yaml_out.py reads
# PyYAML's patterns). A longer string starting otherwise is a string, its regexes not run:
# about a third of a spec's new strings are selectors and expressions starting with "t".
NUMBER_FIRST = frozenset("+-.0123456789")
MAX_WORD = 5
# libyaml's analyze_scalar: a first character that is an indicator rules plain style out.
_INDICATOR_START = frozenset("#,[]{}&*!|>'\"%@`")
# A quoted string this long may fold (libyaml breaks at a space past the width): not written.
_MAX_QUOTED = _WIDTH - 3_000
_MAX_KEY = 128  # libyaml writes a longer key as a complex (`? key`) key


def _block_yaml(data: object) -> str | None:
    """`data` as libyaml writes it with dump()'s options; None where unsure."""
    if type(data) is not dict or not data:
        return None
    lines: list[str] = []
    try:
        _mapping(data, "", lines, _shared_memo())
    except (_Unsupported, RecursionError):
        return None
    lines.append("")
    return "\n".join(lines)


def _string(value: str, memo: _Memo) -> str:
    """A one-line string's text: plain, or single-quoted where plain would read otherwise."""
    text = memo.get(value)
    if text is not None:
        return text
    if not value:
        return "''"
    # Printable ASCII only (space to `~`): two scans in C, cheaper than a regex's (a spec's
    # files bring ~500 new strings).
    if not (value.isascii() and value.isprintable()):
        raise _Unsupported  # a line break, a tab, non-ASCII
    if _plain_allowed(value) and (
        # (A first character that starts no implicit type: plain, as in _Dumper.resolve.)
        value[0] not in _IMPLICIT_FIRST
        or (len(value) > MAX_WORD and value[0] not in NUMBER_FIRST)
        or _RESOLVER.resolve(ScalarNode, value, (True, False)) == _STR
    ):
        text = value  # folded where it is written (_fold)
    elif len(value) <= _MAX_QUOTED:  # libyaml's choice where plain is not allowed or would
        text = "'" + value.replace("'", "''") + "'"  # not read back as a string
    else:
        raise _Unsupported
    memo[value] = text
    return text


def _fold(text: str, column: int, indent: int) -> str:
    """A scalar written from `column` on, as libyaml's write_plain folds it: at a single space
    (no space before or after it) that lies past the line width, a line break and `indent`
    spaces instead of the space. Quoted text folds by other rules: left to libyaml."""
    if column > _WIDTH // 2 or text.startswith("'"):
        raise _Unsupported  # (or a line already that long before it: not worth the cases)
    start, parts = 0, []
    while True:
        # Column of text[i] on the current line: column + i - start; past the width beyond:
        i = text.find(" ", start + _WIDTH - column + 1)
        while i != -1 and (text[i - 1] == " " or text[i + 1 : i + 2] in (" ", "")):
            i = text.find(" ", i + 1)
        if i == -1:
            parts.append(text[start:])
            return ("\n" + " " * indent).join(parts)
        parts.append(text[start:i])
        start, column = i + 1, indent


def _plain_allowed(value: str) -> bool:
    """libyaml's rules for a plain one-line printable ASCII scalar in block context: no
    indicator at its start, no `: ` or ` #` inside, no space at either end, no `:` at its end."""
    first = value[0]
    if first == " " or first in _INDICATOR_START or value.startswith(("---", "...")):
        return False
    if first in "-?:" and (len(value) == 1 or value[1] == " "):
        return False
    return value[-1] not in " :" and ": " not in value and " #" not in value


def _scalar(value: object, memo: _Memo) -> str:
    kind = type(value)
    if kind is str:
        return _string(value, memo)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    raise _Unsupported  # floats, and anything else, as PyYAML represents them


def _key(key: object, memo: _Memo) -> str:
    if type(key) is not str or len(key) > _MAX_KEY:
        raise _Unsupported
    text = _string(key, memo)
    if text != key:  # quoted keys: left to libyaml
        raise _Unsupported
    return text


def _mapping(data: dict, indent: str, lines: list[str], memo: _Memo) -> None:
    """A non-empty block mapping; its first key goes on the line `lines` ends with when that
    is a sequence item's `- ` (libyaml writes `- key: value`)."""
    key_heads, append = memo.key_heads, lines.append
    after_dash = bool(lines) and lines[-1].endswith("- ") and len(lines[-1]) == len(indent)
    for key, value in data.items():
        head = key_heads.get(key)
        if head is None:
            head = key_heads[key] = _key(key, memo) + ":"
        if after_dash:
            lines[-1] += head
            after_dash = False
        elif type(value) is str:
            # A string (most values: a rule's expression and labels, a test's name): its line
            # written at once, as _value would write it after `key:`.
            text = memo.get(value) or _string(value, memo)
            column = len(indent) + len(head) + 1
            if column + len(text) > _WIDTH:  # it may have a space past the width
                text = _fold(text, column, len(indent) + 2)
            append(f"{indent}{head} {text}")
            continue
        else:
            append(indent + head)
        _value(value, indent, lines, memo)


def _sequence(data: list | tuple, indent: str, lines: list[str], memo: _Memo) -> None:
    first_head, next_head = indent + "- ", indent + "  "
    texts, append = memo.get, lines.append
    # Per key of the items' mappings: its line's start as an item's first key and as a later
    # one, and the room left for a value that cannot fold (a test file's thousands of input
    # series share two keys: their lines built from these, one concatenation each). They
    # follow from the indent and the key alone: kept for every sequence at this indent (a
    # test file has hundreds of sequences of the same few keys).
    heads = memo.item_heads.setdefault(indent, {})
    items = iter(data)
    if lines and lines[-1].endswith("- ") and len(lines[-1]) == len(indent):
        # A sequence in a sequence: `- - item`. Only the first item can follow that `- `: every
        # line an item writes is longer than the indent.
        lines[-1] += "- "
        _item(next(items), indent + "  ", lines, memo)
    for item in items:
        if type(item) is dict and item:
            # A mapping of strings (a test file has thousands: its input series), ints and
            # nested values written here as `- ` and _mapping would write it, without their
            # dispatch per value.
            written = len(lines)
            first = True
            for key, value in item.items():
                head = heads.get(key)
                if head is None:
                    key_text = _key(key, memo) + ": "
                    room = _WIDTH - len(first_head) - len(key_text)  # for the value, unfolded
                    head = heads[key] = (first_head + key_text, next_head + key_text, room)
                kind = type(value)
                if kind is str:
                    text = texts(value) or _string(value, memo)
                elif kind is int or (kind is list and not value):
                    # An int or `[]` (a test's expected value, or no samples expected): short
                    # texts, as _value writes them. (The mapping stays on this path.)
                    text = str(value) if kind is int else "[]"
                elif (kind is dict or kind is list) and value:
                    # A nested mapping or sequence (a test's input series, a rule's labels):
                    # `key:` here, the value under it as _mapping writes it.
                    append((head[0] if first else head[1])[:-1])
                    _value(value, next_head, lines, memo)
                    first = False
                    continue
                else:
                    del lines[written:]  # another mapping: the general path below
                    break
                if len(text) > head[2]:  # it may fold
                    text = _fold(text, len(head[0]), len(indent) + 4)
                append((head[0] if first else head[1]) + text)
                first = False
            else:
                continue
        append(first_head)
        _item(item, indent + "  ", lines, memo)


def _value(value: object, indent: str, lines: list[str], memo: _Memo) -> None:
    """A mapping's value after `key:` on the last line."""
    kind = type(value)
    if kind is dict and value:
        _mapping(value, indent + "  ", lines, memo)
    elif (kind is list or kind is tuple) and value:
        _sequence(value, indent, lines, memo)  # libyaml does not indent it under its key
    else:
        # (most values are strings already seen: their text straight from the memo)
        text = (kind is str and memo.get(value)) or _empty_or_scalar(value, memo)
        column = len(lines[-1]) + 1
        if column + len(text) > _WIDTH:  # it may have a space past the width
            text = _fold(text, column, len(indent) + 2)
        lines[-1] += " " + text


def _item(value: object, indent: str, lines: list[str], memo: _Memo) -> None:
    """A sequence item after `- ` on the last line."""
    kind = type(value)
    if kind is dict and value:
        _mapping(value, indent, lines, memo)
    elif (kind is list or kind is tuple) and value:
        _sequence(value, indent, lines, memo)
    else:
        text = _empty_or_scalar(value, memo)
        if len(lines[-1]) + len(text) > _WIDTH:  # it may have a space past the width
            text = _fold(text, len(lines[-1]), len(indent))
        lines[-1] += text


def _empty_or_scalar(value: object, memo: _Memo) -> str:
    kind = type(value)
    if kind is dict:
        return "{}"
    if kind is list or kind is tuple:
        return "[]"
    return _scalar(value, memo)
