"""Package discovery for the one `trainsignals` import namespace.

The repository keeps the top-level folders the project was asked for (generator/, exporters/,
simulator/) and maps each under `trainsignals` (DESIGN.md: no generic names in site-packages).
setuptools' declarative `packages.find` cannot add a prefix per folder, so a hand-written list
in pyproject.toml was the alternative, and it once missed `trainsignals.generator.alertdefs`
(issue 18). Everything else (metadata, dependencies, package data) stays in pyproject.toml.
"""

from __future__ import annotations

from setuptools import find_namespace_packages, setup

# Import name -> repository folder. A new subpackage under any of these ships without an edit.
ROOTS = {
    "trainsignals": "trainsignals",
    "trainsignals.generator": "generator",
    "trainsignals.exporters": "exporters",
    "trainsignals.simulator": "simulator",
}


def packages() -> list[str]:
    # Namespace discovery, as pyproject's `packages.find` does by default: data folders such as
    # generator/templates/ are packages too, so their files ship as that package's data.
    found = list(ROOTS)
    for name, folder in ROOTS.items():
        found += [f"{name}.{sub}" for sub in find_namespace_packages(folder)]
    return sorted(found)


setup(package_dir=ROOTS, packages=packages())
