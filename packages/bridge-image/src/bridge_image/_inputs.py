"""Where the build inputs live, and what identifies them: content hash, git revision, epoch."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from bridge_image.errors import MissingInput

__all__ = [
    "DEFAULT_EPOCH",
    "build_epoch",
    "find_repo",
    "hash_files",
    "hash_tree",
    "source_revision",
]

DEFAULT_EPOCH = 1_704_067_200
"""2024-01-01T00:00:00Z, the default image timestamp (the revision label says what was built)."""

_MARKER = Path("images/sandbox/Containerfile")
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})


def find_repo(start: Path | None = None) -> Path:
    """Return the repository root holding ``images/sandbox/Containerfile``.

    Searched upwards from ``start`` (default: the working directory), then from this file (an
    editable install lives inside the repository).
    """
    candidates = [start or Path.cwd(), Path(__file__).resolve()]
    for origin in candidates:
        for directory in [origin, *origin.parents]:
            if (directory / _MARKER).is_file():
                return directory
    raise MissingInput(
        f"no repository with {_MARKER} above {candidates[0]}: run from a checkout of "
        "MCP Code Execution Mode or pass --repo"
    )


def _tree_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        found.extend(Path(dirpath) / f for f in filenames if not f.endswith((".pyc", ".pyo")))
    return found


def hash_tree(repo: Path, paths: Iterable[str]) -> str:
    """sha256 over the files under ``paths`` (relative to ``repo``): names, contents, exec bits."""
    digest = hashlib.sha256()
    files = sorted({f for p in paths for f in _tree_files(repo / p)})
    for file in files:
        executable = b"x" if os.access(file, os.X_OK) else b"-"
        digest.update(file.relative_to(repo).as_posix().encode() + b"\0" + executable)
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def hash_files(files: Iterable[Path]) -> str:
    """sha256 over the names and contents of ``files`` (order-independent)."""
    digest = hashlib.sha256()
    for file in sorted(files, key=lambda f: f.name):
        digest.update(file.name.encode() + b"\0" + hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def source_revision(repo: Path, paths: Iterable[str]) -> str:
    """The last commit that changed ``paths``, with ``+dirty`` if they have uncommitted changes.

    The last commit *of the inputs*, not HEAD: commits that do not touch the image leave its
    label, and so its digest, unchanged. ``"unknown"`` outside a git checkout.
    """
    path_list = list(paths)
    found = _git(repo, "log", "-1", "--format=%H", "--", *path_list)
    if not found:
        return "unknown"
    if _git(repo, "status", "--porcelain", "--", *path_list):
        return f"{found}+dirty"
    return found


def build_epoch() -> int:
    """The timestamp of every file and history entry of the images: ``SOURCE_DATE_EPOCH`` if
    set, else :data:`DEFAULT_EPOCH`.

    Fixed rather than taken from a commit: buildah's layer cache ignores ``--timestamp``, so a
    moving timestamp either defeats the cache or mixes timestamps from different builds.
    """
    override = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not override:
        return DEFAULT_EPOCH
    if not override.isdigit():
        raise MissingInput(f"SOURCE_DATE_EPOCH must be whole seconds, got {override!r}")
    return int(override)
