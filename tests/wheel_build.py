"""The built wheel in a fresh venv, shared by the tests that use it (one build per session).

tests/test_wheel_install.py checks the package; tests/test_wheel_walkthrough.py walks a new
user's path with it. `python -m build` makes the sdist and, from the unpacked sdist, the wheel
(so both must be complete); the wheel goes into a fresh venv with its dependencies only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Installed:
    wheel: Path
    sdist: Path
    venv: Path
    work: Path  # cwd of every installed command: no repository file in reach

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)

    def env(self) -> dict[str, str]:
        """Nothing from this test run: no PYTHONPATH, no VIRTUAL_ENV, only the venv's bin."""
        return {
            "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin",
            "HOME": str(self.work),
            "LANG": "C.UTF-8",
        }

    def run(self, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, cwd=cwd or self.work, env=self.env(), capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip

    def python(self, *lines: str) -> subprocess.CompletedProcess:
        """The venv's python on `lines` (joined by "; ")."""
        return self.run("python", "-c", "; ".join(lines))


def package_folders() -> dict[str, Path]:
    """Import name -> repository folder: trainsignals/ and the folders its links point to."""
    package = ROOT / "trainsignals"
    folders = {"trainsignals": package}
    for child in sorted(package.iterdir()):
        if child.is_symlink():
            folders[f"trainsignals.{child.name}"] = child.resolve()
    return folders


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("wheel")
    source, dist, venv, work = tmp / "source", tmp / "dist", tmp / "venv", tmp / "work"
    work.mkdir()
    # Build from the files git would commit, as a fresh clone: an egg-info left in the working
    # tree by an earlier build feeds its file list into the sdist and hides a discovery bug.
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for relative in filter(None, listed):
        path, copy = ROOT / relative, source / relative
        if not (path.is_symlink() or path.is_file()):  # a file deleted in the working tree
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():  # trainsignals/generator etc.: links, as in a clone
            copy.symlink_to(os.readlink(path))
        else:
            shutil.copy2(path, copy)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    # A venv without pip (faster); this run's pip installs into it. Base packages only: the
    # wheel's own dependencies, no torch and no test extras.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-3000:]
    return Installed(wheel, sdist, venv, work)
