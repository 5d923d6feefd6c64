"""Where the build inputs live, and what identifies them: content hash, git revision, epoch."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from bridge_image.errors import MissingInput

__all__ = [
    "DEFAULT_EPOCH",
    "PACKAGED_RECIPE",
    "REVISIONS_FILE",
    "build_epoch",
    "cache_dir",
    "find_repo",
    "hash_files",
    "hash_tree",
    "recorded_revisions",
    "source_revision",
    "tree_files",
]

DEFAULT_EPOCH = 1_704_067_200
"""2024-01-01T00:00:00Z, the default image timestamp (the revision label says what was built)."""

_MARKER = Path("images/sandbox/Containerfile")
_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
RELEASE_RECORD = "packages/bridge-image/src/bridge_image/release.json"
"""Written AFTER the images of a release are built and pushed: not an input of those images (it
holds their digests), so neither the inputs hash nor the revision label may see it."""

PACKAGED_RECIPE = Path(__file__).resolve().parent / "_recipe"
"""The recipe a built wheel carries: the repository files the builder reads (images/, the
protocol and sandbox-client projects, this builder's source), at their repository paths, so the
same inputs give the same inputs hash as in the checkout the wheel was built from."""

REVISIONS_FILE = "revisions.json"
"""In the packaged recipe: the revision label of each variant, recorded when the wheel was built
(there is no git history to ask after installation)."""


def find_repo(start: Path | None = None) -> Path:
    """Return the root holding ``images/sandbox/Containerfile``: a checkout, or the recipe
    packaged in this wheel.

    ``start`` given (``--repo``): searched upwards from it. Otherwise, in order: the recipe
    packaged in this wheel (an installed wheel builds the image of its own version, whatever the
    working directory), the checkout this file lives in (an editable install), then upwards from
    the working directory (a wheel built without its recipe, e.g. from the package folder alone).
    """
    if start is None and (PACKAGED_RECIPE / _MARKER).is_file():
        return PACKAGED_RECIPE
    origins = [start] if start is not None else [Path(__file__).resolve().parent, Path.cwd()]
    for origin in origins:
        for directory in [origin, *origin.parents]:
            if (directory / _MARKER).is_file():
                return directory
    raise MissingInput(
        f"no repository with {_MARKER} above {origins[-1]}, and this installation of "
        "mcp-bridge-image carries no recipe: run from a checkout of MCP Code Execution Mode or "
        "pass --repo"
    )


def cache_dir(root: Path) -> Path:
    """Where builds keep downloaded wheels, contexts and the bootstrap work directory.

    ``.cache/bridge-image`` of a writable checkout (scripts/prepare-host and the tests find it
    there); otherwise, for the packaged recipe or a read-only tree,
    ``$XDG_CACHE_HOME/mcp-code-execution-mode/bridge-image`` (default ``~/.cache``), never inside
    site-packages.
    """
    if root != PACKAGED_RECIPE and os.access(root, os.W_OK):
        return root / ".cache/bridge-image"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-code-execution-mode" / "bridge-image"


def recorded_revisions(root: Path) -> dict[str, str] | None:
    """The revisions recorded in a packaged recipe (variant -> revision), None in a checkout."""
    path = root / REVISIONS_FILE
    if not path.is_file():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MissingInput(f"cannot read the recorded revisions {path}: {exc}") from exc
    if not isinstance(found, dict):
        raise MissingInput(f"{path} is not an object of variant -> revision")
    return {str(k): str(v) for k, v in found.items()}


def tree_files(root: Path) -> list[Path]:
    """The files under ``root`` (or ``root`` itself) that make up an input: bytecode and tool
    caches left out. The inputs hash and the packaged recipe take exactly these."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        found.extend(
            Path(dirpath) / f
            for f in filenames
            if not f.endswith((".pyc", ".pyo"))
            and not (f == "release.json" and Path(dirpath).name == "bridge_image")
        )
    return found


def hash_tree(repo: Path, paths: Iterable[str]) -> str:
    """sha256 over the files under ``paths`` (relative to ``repo``): names, contents, exec bits."""
    digest = hashlib.sha256()
    files = sorted({f for p in paths for f in tree_files(repo / p)})
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
    path_list = [*paths, f":(exclude){RELEASE_RECORD}"]
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
