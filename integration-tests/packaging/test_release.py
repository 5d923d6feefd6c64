"""`hatch run release:check|build` refuses unless every member releases as one version.

Refusals are tested on a temporary copy of the members' pyproject.toml files and the changelog,
never by editing the real ones.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def test_release_refuses_without_a_changelog_section_for_the_version(tmp_path: Path) -> None:
    root = _copy_release_inputs(tmp_path)
    _edit(root / "CHANGELOG.md", "## [0.1.0]", "## [0.0.1]")
    checked = _release_check(root)
    assert checked.returncode == 1
    assert "CHANGELOG.md has no section '## 0.1.0'" in checked.stderr
