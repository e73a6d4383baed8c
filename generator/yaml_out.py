"""Deterministic, review-friendly YAML: insertion order kept, no aliases, no line wrapping."""

from __future__ import annotations

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

# libyaml's emitter is ~10x faster than the pure-Python one and writes the same text.
_Base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


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
    body = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        width=10_000,
        allow_unicode=True,
        default_flow_style=False,
    )
    return header + body
