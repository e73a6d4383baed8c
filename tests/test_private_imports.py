"""No module of the package reaches into another module's `_private` names.

A leading underscore says "only this module uses it". When another module imports it, the two
files are one module split in the wrong place, or the name is the real public function of its
module under a private name: either way the reader of the owning module is misled. This test
reads the sources with `ast` (nothing is imported) and reports both forms:

- `from trainsignals.x import _y` (or a relative `from .x import _y`);
- `x._y` where `x` is bound in this module to one of the package's modules
  (`from trainsignals.generator import x`, `import trainsignals.x as x`).

Dunder names (`__version__`, `__all__`) are public by convention and allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Import name -> repository folder, as setup.py maps them.
MAPPED = {
    "trainsignals.generator": "generator",
    "trainsignals.exporters": "exporters",
    "trainsignals.simulator": "simulator",
    "trainsignals": "trainsignals",
}


def _module_files() -> dict[str, Path]:
    """Every module of the package, by its import name."""
    modules: dict[str, Path] = {}
    for prefix, folder in MAPPED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([prefix, *parts])] = path
    return modules


MODULES = _module_files()


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute name a (possibly relative) `from ... import` reads from."""
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def offenders_in(module: str, path: Path, source: str | None = None) -> list[str]:
    """`path` holds `module`; `source` stands in for its text (the test of the test)."""
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    found: list[str] = []
    bound_modules: set[str] = set()  # local names bound to one of the package's modules
    where = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            if source not in MODULES:
                continue
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:
                    bound_modules.add(alias.asname or alias.name)
                elif _is_private(alias.name):
                    found.append(f"{where}:{node.lineno}: from {source} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    bound_modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound_modules
            and _is_private(node.attr)
        ):
            found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_scan_sees_the_package() -> None:
    """A scan that found no modules would pass vacuously."""
    assert "trainsignals.generator.pipeline" in MODULES
    assert "trainsignals.exporters.training.metrics" in MODULES
    assert "trainsignals.simulator.job" in MODULES
    assert "trainsignals.cli.main" in MODULES


def test_the_scan_finds_both_forms() -> None:
    """The check can fail: a private import and a private attribute are both reported."""
    probe = (
        "from trainsignals.generator.signals import promql\n"
        "from .output.files import _hidden\n"
        "x = promql._helper\n"
    )
    # Read as if it were generator/pipeline.py, so the relative import resolves.
    found = offenders_in(
        "trainsignals.generator.pipeline", ROOT / "generator" / "pipeline.py", probe
    )
    assert [f.split(": ", 1)[1] for f in found] == [
        "from trainsignals.generator.output.files import _hidden",
        "promql._helper",
    ]


def test_no_private_name_crosses_modules() -> None:
    found = [line for module, path in MODULES.items() for line in offenders_in(module, path)]
    assert not found, (
        "modules import another module's _private names; make the name public on the module "
        "that owns it (or move the code to where it is used):\n  " + "\n  ".join(found)
    )
