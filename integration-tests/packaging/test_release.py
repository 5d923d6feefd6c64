"""`hatch run release:check|build` refuses unless every member releases as one version.

Refusals are tested on a temporary copy of the members' pyproject.toml files and the changelog,
never by editing the real ones. The wheelhouse asks an index for third-party names only and fails
the release when incomplete; the image package's sdist builds a wheel with the same recipe.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
RELEASE = REPO / "scripts" / "release.py"


def _copy_release_inputs(target: Path) -> Path:
    """The members' pyproject.toml files and sources, and the changelog, under ``target``."""
    for pyproject in (REPO / "packages").glob("*/pyproject.toml"):
        member = target / "packages" / pyproject.parent.name
        member.mkdir(parents=True)
        shutil.copyfile(pyproject, member / "pyproject.toml")
        shutil.copytree(
            pyproject.parent / "src", member / "src", ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copyfile(REPO / "CHANGELOG.md", target / "CHANGELOG.md")
    return target


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _release_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RELEASE), "check", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_repository_releases_as_one_version() -> None:
    checked = _release_check(REPO)
    assert checked.returncode == 0, checked.stderr
    assert "5 members agree on version" in checked.stdout


def test_release_refuses_when_a_member_has_another_version(tmp_path: Path) -> None:
    root = _copy_release_inputs(tmp_path)
    _edit(root / "packages/bridge-image/pyproject.toml", 'version = "0.1.0"', 'version = "0.1.1"')
    checked = _release_check(root)
    assert checked.returncode == 1
    assert "REFUSED" in checked.stderr
    assert "mcp-bridge-image 0.1.1" in checked.stderr


def test_release_refuses_when_a_sibling_pin_is_loose_or_stale(tmp_path: Path) -> None:
    root = _copy_release_inputs(tmp_path)
    _edit(
        root / "packages/bridge-server/pyproject.toml",
        '"mcp-bridge-core==0.1.0"',
        '"mcp-bridge-core>=0.1.0"',
    )
    _edit(
        root / "packages/bridge-sandbox-client/pyproject.toml",
        '"mcp-bridge-protocol==0.1.0"',
        '"mcp-bridge-protocol==0.0.9"',
    )
    checked = _release_check(root)
    assert checked.returncode == 1
    assert "bridge-server/pyproject.toml requires 'mcp-bridge-core>=0.1.0'" in checked.stderr
    assert "bridge-sandbox-client/pyproject.toml" in checked.stderr


def test_release_refuses_when_a_source_spells_another_version(tmp_path: Path) -> None:
    root = _copy_release_inputs(tmp_path)
    _edit(
        root / "packages/bridge-server/src/mcp_code_execution_mode/__init__.py",
        '__version__ = "0.1.0"',
        '__version__ = "0.2.0"',
    )
    _edit(
        root / "packages/bridge-image/src/bridge_image/names.py",
        'IMAGE_VERSION = "0.1.0"',
        'IMAGE_VERSION = "0.0.9"',
    )
    checked = _release_check(root)
    assert checked.returncode == 1
    assert "mcp_code_execution_mode/__init__.py sets __version__ = '0.2.0'" in checked.stderr
    assert "bridge_image/names.py sets IMAGE_VERSION = '0.0.9'" in checked.stderr


def test_release_refuses_when_a_doc_or_test_names_a_stale_image_tag(tmp_path: Path) -> None:
    root = _copy_release_inputs(tmp_path)
    stale = "localhost/mcp-bridge-sandbox" + "-slim:0.0.9"  # split: this file is scanned too
    (root / "docs").mkdir()
    (root / "docs" / "images.md").write_text(f"Run:\n\n    podman run {stale}\n")
    test = root / "packages/bridge-image/tests/test_names.py"
    test.parent.mkdir()
    test.write_text(f'IMAGE = "{stale.replace("-slim", "")}"\n')
    checked = _release_check(root)
    assert checked.returncode == 1
    assert f"docs/images.md:3 names the image '{stale.split('/')[1]}'" in checked.stderr
    assert "bridge-image/tests/test_names.py:1 names the image" in checked.stderr


def test_release_refuses_without_a_changelog_section_for_the_version(tmp_path: Path) -> None:
    root = _copy_release_inputs(tmp_path)
    _edit(root / "CHANGELOG.md", "## [0.1.0]", "## [0.0.1]")
    checked = _release_check(root)
    assert checked.returncode == 1
    assert "CHANGELOG.md has no section '## 0.1.0'" in checked.stderr


def _wheelhouse_module() -> Any:
    spec = importlib.util.spec_from_file_location("wheelhouse", REPO / "scripts" / "wheelhouse.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["wheelhouse"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_wheelhouse_asks_the_index_only_for_third_party_names() -> None:
    wheelhouse = _wheelhouse_module()
    pyprojects = (REPO / "packages").glob("*/pyproject.toml")
    members = [tomllib.loads(p.read_text())["project"] for p in pyprojects]
    siblings = {m["name"] for m in members}
    wanted = wheelhouse.third_party_requirements(
        [d for m in members for d in m.get("dependencies", [])], siblings
    )
    names = {re.match(r"[A-Za-z0-9._-]+", r).group(0).lower() for r in wanted}  # type: ignore[union-attr]
    assert not names & siblings
    assert {"mcp", "cbor2", "hatchling", "pip", "podman"} <= names
    server = next(m for m in members if m["name"] == "mcp-code-execution-mode")
    assert wheelhouse.default_pythons(server["classifiers"]) == ["3.11", "3.12", "3.13"]


def test_an_incomplete_wheelhouse_fails_the_release_naming_the_target(
    release_dist: Path, tmp_path: Path
) -> None:
    wheelhouse = _wheelhouse_module()
    ours_only = tmp_path / "dist"
    ours_only.mkdir()
    for wheel in release_dist.glob("mcp_*.whl"):
        shutil.copy2(wheel, ours_only / wheel.name)
    target = wheelhouse.Target(f"{sys.version_info.major}.{sys.version_info.minor}", "x86_64")
    with pytest.raises(SystemExit) as refused:
        wheelhouse._check(wheelhouse._uv(), ours_only, "mcp-code-execution-mode", target, tmp_path)
    assert "the wheelhouse is incomplete" in str(refused.value)
    assert str(target) in str(refused.value)


def test_a_wheel_built_from_the_image_sdist_carries_the_same_recipe(
    release_dist: Path, tmp_path: Path
) -> None:
    sdist = next(release_dist.glob("mcp_bridge_image-*.tar.gz"))
    released = next(release_dist.glob("mcp_bridge_image-*.whl"))
    rebuilt = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--wheel-dir", str(tmp_path), str(sdist)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert rebuilt.returncode == 0, rebuilt.stderr
    from_sdist = next(tmp_path.glob("mcp_bridge_image-*.whl"))

    def recipe(wheel: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            return {n: archive.read(n) for n in names if n.startswith("bridge_image/_recipe/")}

    expected = recipe(released)
    assert "bridge_image/_recipe/images/sandbox/Containerfile" in expected
    assert "bridge_image/_recipe/revisions.json" in expected
    assert recipe(from_sdist) == expected
