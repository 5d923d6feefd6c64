"""Wheels for the build context: ours built from the repository, third-party ones downloaded.

Both happen on the host, so the image build itself needs no network and no registry.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
from pathlib import Path

from bridge_image._run import Progress, run_streamed
from bridge_image.errors import BuildFailed, MissingTool

__all__ = [
    "PYTHON_VERSION",
    "build_repo_wheels",
    "fetch_pinned_wheels",
    "wheel_arch",
    "wheel_platforms",
]

PYTHON_VERSION = "3.13"
"""The image's interpreter line (Debian trixie's python3, python:3.13 on the normal path)."""

_GLIBC_MINORS = range(28, 16, -1)
# manylinux_2_28 down to manylinux_2_17 (trixie's glibc is 2.41; the pins were resolved with
# 2.28 as the newest). pip does not widen an explicit --platform to older tags itself: list them.

_ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def wheel_arch(machine: str | None = None) -> str:
    """The wheel architecture of the images built on this host: ``x86_64`` or ``aarch64``."""
    raw = (machine or platform.machine()).lower()
    arch = _ARCHES.get(raw)
    if arch is None:
        raise BuildFailed(f"no sandbox wheels are pinned for the {raw!r} architecture")
    return arch


def wheel_platforms(machine: str | None = None) -> list[str]:
    """pip platform tags the image accepts, most specific first (``manylinux_2_28_x86_64``, ...)."""
    arch = wheel_arch(machine)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in _GLIBC_MINORS]
    return [*tags, f"manylinux2014_{arch}"]


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", *args]


def build_repo_wheels(
    projects: list[Path], dest: Path, *, epoch: int, progress: Progress | None
) -> list[Path]:
    """Build a wheel of each project directory into ``dest`` (emptied first).

    hatchling builds are reproducible: with ``SOURCE_DATE_EPOCH`` set, the same sources give the
    same wheel bytes, so the image layer that installs them stays cached until a source changes.
    No build isolation: the hatchling of this environment (a dependency of bridge-image) is
    used, so building needs no index.
    """
    try:
        import hatchling  # noqa: F401
    except ImportError as exc:
        raise MissingTool(
            f"hatchling is not importable by {sys.executable}: install mcp-bridge-image with its "
            "dependencies (e.g. `hatch run image:build`)"
        ) from exc
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
    argv = _pip(
        "wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", str(dest)
    )
    run_streamed([*argv, *map(str, projects)], progress=progress, what="building wheels", env=env)
    return sorted(dest.glob("*.whl"))


def fetch_pinned_wheels(
    requirements: Path, dest: Path, *, cache: Path, progress: Progress | None
) -> list[Path]:
    """Put the wheels pinned (by hash) in ``requirements`` for the image's platform in ``dest``.

    The download cache is tried first with no index, so repeated builds (and air-gapped machines
    with a filled cache) need no network; otherwise pip downloads from its configured index.
    """
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    cache.mkdir(parents=True, exist_ok=True)
    target = [
        "download",
        "--require-hashes",
        "--only-binary=:all:",
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
        "--abi",
        f"cp{PYTHON_VERSION.replace('.', '')}",
        "--abi",
        "abi3",
        "--abi",
        "none",
        *(f"--platform={tag}" for tag in wheel_platforms()),
        "--find-links",
        str(cache),
        "--dest",
        str(dest),
        "--requirement",
        str(requirements),
    ]
    try:
        run_streamed(_pip(*target, "--no-index"), progress=None, what="wheels from cache")
    except BuildFailed:
        run_streamed(_pip(*target), progress=progress, what=f"downloading {requirements.name}")
    wheels = sorted(dest.glob("*.whl"))
    for wheel in wheels:
        if not (cache / wheel.name).exists():
            shutil.copy2(wheel, cache / wheel.name)
    return wheels
