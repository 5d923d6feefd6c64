"""The wheelhouse of a release: every third-party wheel the server needs, beside our own wheels.

With it, ``dist/`` installs with no package index at all (``pip install --no-index --find-links
dist``, ``pipx install --pip-args="--no-index --find-links dist"``, ``uv tool install --no-index
--find-links dist``), so our names can never be resolved against a public index (a same-named
upload there is never even seen), and an air-gapped machine can install.

Each target (a CPython version and a Linux architecture) is resolved separately with
``uv pip compile``, because ``pip download --python-version`` evaluates environment markers for
the interpreter running it, not for the target; the pinned list is then downloaded with
``pip download --no-deps`` for that target's wheel tags. The resolution starts from the
third-party requirements of the members only: our own names are never sent to an index. Finally
every target is resolved again from the folder alone (``--no-index``), which proves it complete.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ARCHES",
    "Target",
    "default_pythons",
    "fill",
    "host_arch",
    "third_party_requirements",
]

ARCHES = ("x86_64", "aarch64")
"""Linux architectures a wheelhouse can serve: PCs and servers; ARM machines and Linux VMs on
Apple silicon."""

_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}

GLIBC = "2_28"
"""Newest manylinux tag resolved for (RHEL 8 and Debian 10 era): older tags are accepted too."""

_CLASSIFIER = re.compile(r"^Programming Language :: Python :: (3\.\d+)$")
_NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Target:
    """One interpreter the wheelhouse must serve: CPython ``python`` on Linux ``arch``."""

    python: str
    arch: str

    @property
    def uv_platform(self) -> str:
        return f"{self.arch}-manylinux_{GLIBC}"

    def pip_tags(self) -> list[str]:
        """``pip download`` options selecting this target's wheels (manylinux 2.28 down to 2014)."""
        minors = range(int(GLIBC.split("_")[1]), 16, -1)
        platforms = [
            *(f"manylinux_2_{m}_{self.arch}" for m in minors),
            f"manylinux2014_{self.arch}",
        ]
        abi = f"cp{self.python.replace('.', '')}"
        return [
            "--python-version",
            self.python,
            "--implementation",
            "cp",
            *(f"--abi={a}" for a in (abi, "abi3", "none")),
            *(f"--platform={p}" for p in platforms),
        ]

    def __str__(self) -> str:
        return f"cp{self.python.replace('.', '')}-{self.arch}"


def default_pythons(pyproject_classifiers: Iterable[str]) -> list[str]:
    """The Python versions a member declares in its classifiers (``3.11``, ``3.12``, ...)."""
    found = {m.group(1) for c in pyproject_classifiers if (m := _CLASSIFIER.match(c))}
    return sorted(found, key=lambda v: tuple(map(int, v.split("."))))


def host_arch() -> str:
    """This machine's architecture as a wheelhouse target (the default one)."""
    machine = platform.machine().lower()
    if machine not in _MACHINES:
        sys.exit(f"release: no wheelhouse for the {machine!r} architecture; pass --arch")
    return _MACHINES[machine]


def third_party_requirements(dependencies: Iterable[str], siblings: set[str]) -> list[str]:
    """The requirement lines of ``dependencies`` that are not siblings (markers kept)."""
    found = []
    for requirement in dependencies:
        match = _NAME.match(requirement.strip())
        name = re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else ""
        if name and name not in siblings:
            found.append(requirement.strip())
    return sorted(set(found))


def _uv() -> list[str]:
    # uv comes with hatch (the release environment's only dependency).
    try:
        from uv import find_uv_bin
    except ImportError:
        sys.exit("release: uv is not importable: run this through `hatch run release:build`")
    return [find_uv_bin()]


def _run(argv: Sequence[str], what: str) -> None:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        sys.exit(f"release: {what} failed (exit {done.returncode}):\n{tail}")


def _target_wheels(uv: list[str], wanted: Path, target: Target, scratch: Path) -> Path:
    """Resolve and download the wheels of one target into a folder of its own."""
    pinned = scratch / f"{target}.txt"
    folder = scratch / str(target)
    _run(
        [
            *uv, "pip", "compile", str(wanted), "--output-file", str(pinned),
            "--python-version", target.python, "--python-platform", target.uv_platform,
            "--only-binary", ":all:", "--no-header", "--no-annotate", "--quiet",
        ],
        f"resolving the third-party dependencies for {target}",
    )  # fmt: skip
    _run(
        [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--only-binary=:all:", *target.pip_tags(), "--dest", str(folder),
            "--requirement", str(pinned),
        ],
        f"downloading the wheels for {target}",
    )  # fmt: skip
    return folder


def fill(out: Path, requirements: list[str], targets: list[Target], server: str) -> list[Path]:
    """Download the wheels of ``requirements`` for every target into ``out``; then check that
    ``server`` resolves for every target from ``out`` alone. Returns the wheels added."""
    before = set(out.glob("*.whl"))
    uv = _uv()
    with tempfile.TemporaryDirectory(prefix="wheelhouse-") as scratch_dir:
        scratch = Path(scratch_dir)
        wanted = scratch / "third-party.in"
        wanted.write_text("\n".join(requirements) + "\n", encoding="utf-8")
        print(f"release: wheelhouse for {', '.join(map(str, targets))}", file=sys.stderr)
        # The targets are independent and each waits mostly on the index: all at once. Each
        # downloads into its own folder (two pip processes never write one file).
        with ThreadPoolExecutor(max_workers=len(targets)) as pool:
            folders = list(pool.map(lambda t: _target_wheels(uv, wanted, t, scratch), targets))
        for folder in folders:
            for wheel in folder.glob("*.whl"):
                if not (out / wheel.name).exists():
                    shutil.copy2(wheel, out / wheel.name)
        for target in targets:
            _check(uv, out, server, target, scratch)
    return sorted(set(out.glob("*.whl")) - before)


def _check(uv: list[str], out: Path, server: str, target: Target, scratch: Path) -> None:
    request = scratch / "server.in"
    request.write_text(f"{server}\n", encoding="utf-8")
    _run(
        [
            *uv, "pip", "compile", str(request), "--no-index", "--find-links", str(out),
            "--python-version", target.python, "--python-platform", target.uv_platform,
            "--no-header", "--quiet", "--output-file", str(scratch / "check.txt"),
        ],
        f"resolving {server} for {target} from {out} alone (the wheelhouse is incomplete)",
    )  # fmt: skip
