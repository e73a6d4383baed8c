"""A Prometheus text-format (0.0.4) writer for the collector's own families.

prometheus_client's `generate_latest` spends ~7 µs per line building a label dict, sorting
and escaping it, for every sample of every scrape; with ~500 lines for 8 GPUs that was three
quarters of the scrape. Here each series' `name{labels} ` prefix is built once and reused:
a GPU's labels (node, gpu, uuid, model and the constant labels) only change when the GPU or
its processes do. The output is what `generate_latest` writes for the same samples, byte
for byte (label names sorted, the same escaping, values formatted like `floatToGoString`);
tests/test_gpu_exposition.py holds it to that.
"""

from __future__ import annotations

import math
from collections.abc import Collection

from trainsignals.exporters.gpu.families import Families, FamilySpec, family_spec

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_SPECIAL = {math.inf: "+Inf", -math.inf: "-Inf"}


def format_value(value: float) -> str:
    """A sample value as prometheus_client's `floatToGoString` writes it."""
    d = float(value)
    if d != d:  # NaN is the only float unequal to itself
        return "NaN"
    special = _SPECIAL.get(d)
    if special is not None:
        return special
    s = repr(d)
    dot = s.find(".")
    # Go switches to exponent notation sooner than Python's repr: 85899345920.0 is written
    # 8.589934592e+10, as generate_latest does (only for positive values, like it).
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def escape_label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


class _FamilyFormat:
    """Header and series prefixes of one family, kept across scrapes."""

    def __init__(self, spec: FamilySpec, const_labels: dict[str, str]) -> None:
        self.spec = spec
        self.const_labels = const_labels
        kind = "counter" if spec.counter else "gauge"
        # CounterMetricFamily strips `_total` from the family name and adds it back on the
        # sample, so HELP/TYPE and samples all carry the catalog name's `_total`.
        self.sample_name = spec.name
        if spec.counter and not spec.name.endswith("_total"):
            self.sample_name += "_total"
        self.header = (
            f"# HELP {self.sample_name} {escape_help(spec.help)}\n"
            f"# TYPE {self.sample_name} {kind}\n"
        )
        # label values -> 'name{a="x",b="y"} '. Replaced by the series of the latest scrape
        # each time, so series that went away (a process that ended) do not pile up.
        self.prefixes: dict[tuple[str, ...], str] = {}

    def prefix(self, labels: tuple[str, ...]) -> str:
        # The same dict(zip(...)) and sort as generate_latest: label names in sorted order,
        # a constant label that repeats a catalog label name wins, as in add_metric.
        names = (*self.spec.labels, *self.const_labels)
        values = (*labels, *self.const_labels.values())
        pairs = sorted(dict(zip(names, values, strict=False)).items())
        if not pairs:
            return f"{self.sample_name} "
        body = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs)
        return f"{self.sample_name}{{{body}}} "


class TextWriter:
    """Writes one collector's `Families` in the text format; not thread-safe (the collector
    calls it under its scrape lock)."""

    def __init__(self, const_labels: dict[str, str]) -> None:
        self._const_labels = dict(const_labels)
        self._families: dict[str, _FamilyFormat] = {}

    def write(self, fams: Families, names: Collection[str] | None = None) -> bytes:
        """The text of `fams`; with `names`, only the families whose samples are named so
        (`/metrics?name[]=...`)."""
        out: list[str] = []
        for name, samples in fams.samples.items():
            fmt = self._families.get(name)
            if fmt is None:
                fmt = self._families[name] = _FamilyFormat(family_spec(name), self._const_labels)
            if names is not None and fmt.sample_name not in names:
                continue
            out.append(fmt.header)
            known, fresh = fmt.prefixes, {}
            for labels, value in samples:
                prefix = known.get(labels)
                if prefix is None:
                    prefix = fmt.prefix(labels)
                fresh[labels] = prefix
                out.append(f"{prefix}{format_value(value)}\n")
            fmt.prefixes = fresh
        return "".join(out).encode()
