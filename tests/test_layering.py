"""The import layering of pyproject.toml's [tool.importlinter] contracts, on the checkout itself.

The checkout is the package: trainsignals/generator, trainsignals/exporters and
trainsignals/simulator are links to the top-level folders, so `lint-imports` run from the
repository root (as `make lint` runs it) sees the modules Python imports. It checks that no
import circle exists at any depth and that each layer imports only the layers below it.
README.md "Layout" and CONTRIBUTING.md say where a change belongs and what it may import.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    """`lint-imports` as `make lint` runs it: from `cwd`, which it puts first on the path."""
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    return subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_contracts_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_links_make_the_checkout_the_package() -> None:
    """What setuptools packages and what lint-imports reads: the links, not copies."""
    for folder in ("generator", "exporters", "simulator"):
        link = ROOT / "trainsignals" / folder
        assert link.is_symlink(), f"{link} must be a link to ../{folder}"
        assert link.resolve() == ROOT / folder


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
    """The check can fail: one forbidden import added to a copy breaks a contract (a copy, so
    the tests beside this one keep reading the real tree)."""
    shutil.copytree(  # the links followed: a plain package, as a wheel holds it
        ROOT / "trainsignals",
        tmp_path / "trainsignals",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    sub, _, rest = module.partition("/")
    target = tmp_path / "trainsignals" / (rest if sub == "trainsignals" else module)
    target.write_text(target.read_text() + "\n" + line + "\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert broken in " ".join(result.stdout.split()), result.stdout
