"""constraints.txt, the lock CI installs from, agrees with every declared range.

A floor raised in a pyproject.toml (or a new dependency) without refreshing the lock would make
CI install a version the package refuses, or nothing pinned at all; this test names the package
and the fix. It reads files only: no index is asked.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def _lock_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lock", REPO / "scripts" / "lock.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["lock"] = module
    spec.loader.exec_module(module)
    return module


def test_every_declared_requirement_is_pinned_inside_its_range() -> None:
    lock = _lock_module()
    pinned = lock.pins((REPO / "constraints.txt").read_text("utf-8"))
    wrong = []
    for line in lock.requirements():
        requirement = Requirement(line)
        name = lock._normalise(requirement.name)
        if name not in pinned:
            wrong.append(f"{line!r} has no pin")
        elif not requirement.specifier.contains(pinned[name], prereleases=True):
            wrong.append(f"{line!r} excludes the pinned {name}=={pinned[name]}")
    assert not wrong, (
        "constraints.txt disagrees with the declared ranges; refresh it with "
        "`python scripts/lock.py`:\n" + "\n".join(wrong)
    )


def test_the_lock_covers_the_dependencies_of_the_members_and_ci_environments() -> None:
    names = {Requirement(line).name for line in _lock_module().requirements()}
    assert {"mcp", "pydantic", "cbor2", "podman", "pytest", "mypy", "ruff"} <= names
    assert not {n for n in names if n.startswith("mcp-bridge")}  # siblings are installed from here
