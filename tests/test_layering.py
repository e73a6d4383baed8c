"""The import layering of pyproject.toml's [tool.importlinter] contracts, on the tree as installed.

setup.py maps generator/, exporters/ and simulator/ under `trainsignals`; the editable install
hides that from an import graph (grimp sees trainsignals/ alone). So the mapped folders are
copied into one `trainsignals` package in a temporary folder and import-linter checks it there:
no import circle at any depth, and each layer imports only the layers below it. README.md
"Layout" and CONTRIBUTING.md say where a change belongs and what it may import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Import name -> repository folder, as setup.py maps them.
MAPPED = {"": "trainsignals", "generator": "generator", "exporters": "exporters",
          "simulator": "simulator"}  # fmt: skip


def installed_tree(into: Path) -> Path:
    """The `trainsignals` package as a wheel lays it out, sources only."""
    package = into / "trainsignals"
    for sub, folder in MAPPED.items():
        shutil.copytree(
            ROOT / folder,
            package / sub if sub else package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
    return into


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_contracts_kept(tmp_path: Path) -> None:
    result = lint_imports(installed_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # A layer breach: the alert definitions reaching up to a builder.
        (
            "generator/alerts/model.py",
            "from trainsignals.generator.routing import alertmanager  # noqa: F401",
            "trainsignals.generator.alerts is not allowed to import",
        ),
        # A circle inside one layer: the spec model importing the loader built on it.
        (
            "generator/spec/job.py",
            "from trainsignals.generator.spec import monitoring  # noqa: F401",
            "No cycles are allowed in trainsignals.generator.spec",
        ),
        # The exporters must not need the generator.
        (
            "exporters/training/metrics.py",
            "import trainsignals.generator.spec.job  # noqa: F401",
            "trainsignals.exporters is not allowed to import",
        ),
    ],
)
def test_a_breach_fails(tmp_path: Path, module: str, line: str, broken: str) -> None:
    """The check can fail: one forbidden import added to the copy breaks a contract."""
    tree = installed_tree(tmp_path)
    sub, _, rest = module.partition("/")
    target = tree / "trainsignals" / (rest if sub == "trainsignals" else module)
    target.write_text(target.read_text() + "\n" + line + "\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert broken in " ".join(result.stdout.split()), result.stdout
