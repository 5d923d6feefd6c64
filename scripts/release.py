"""Build the wheel and sdist of every member, after checking they release as one version.

    hatch run release:check             # versions, sibling pins and CHANGELOG agree, or exit 1
    hatch run release:build [--out DIR] # the check, then wheels + sdists of all members in DIR,
                                        # and the wheelhouse of their third-party dependencies

The wheelhouse (see ``scripts/wheelhouse.py``) makes the folder installable with no package index:
for every Python the members declare (their classifiers) on this machine's architecture (Linux
wheels); ``--python 3.12`` and ``--arch aarch64`` (repeatable) choose other targets,
``--no-wheelhouse`` leaves it out.

Every member of packages/ carries the same version (in its pyproject.toml, and wherever its
sources spell it: ``__version__``, the image tag ``IMAGE_VERSION``, and every image tag written out
in the docs, examples, scripts and tests), every dependency on a sibling
pins it exactly (``==<version>``), and CHANGELOG.md has a section for it; otherwise the script
refuses and names each disagreement. The built wheels are checked again (their
``Requires-Dist``), so what is shipped is what was checked. ``--root`` points at another checkout
(the tests use a temporary copy).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import wheelhouse  # scripts/wheelhouse.py, beside this script

__all__ = ["Member", "main", "problems", "read_members"]

_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9._-]+")
# Versions also written in the sources: each package's __version__, and the sandbox image tag
# (bridge_image.names.IMAGE_VERSION), which follows the release.
_SOURCE_VERSION = re.compile(r'^(__version__|IMAGE_VERSION)\s*=\s*"([^"]*)"', re.MULTILINE)
# Image tags spelled out in docs, examples and scripts (the code takes them from
# bridge_image.names): after a version bump a stale one would send users to an old image.
_IMAGE_TAG = re.compile(r"mcp-bridge-sandbox(?:-slim)?:(\d+\.\d+\.\d+[A-Za-z0-9.+-]*)")
_TAG_FOLDERS = ("docs", "images", "bench", "scripts", "packages", "integration-tests")
_TAG_FILES = ("README.md",)  # CHANGELOG.md names old releases on purpose
_TAG_SUFFIXES = {".md", ".py", ".toml", ".sh", ".json", ".yml", ".yaml", ".txt", ""}
_SKIPPED_DIRS = {"__pycache__", "dist", "build", "site", "node_modules", "vectors"}


@dataclass(frozen=True)
class Member:
    """One distribution of the workspace, as its pyproject.toml declares it."""

    folder: Path
    name: str
    version: str
    dependencies: tuple[str, ...]
    classifiers: tuple[str, ...] = ()


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_members(root: Path) -> list[Member]:
    """Every ``packages/*/pyproject.toml`` under ``root``."""
    members = []
    for pyproject in sorted((root / "packages").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        members.append(
            Member(
                folder=pyproject.parent,
                name=project["name"],
                version=project["version"],
                dependencies=tuple(project.get("dependencies", ())),
                classifiers=tuple(project.get("classifiers", ())),
            )
        )
    return members


def _sibling_pin_problems(
    where: str, requirements: list[str], version: str, siblings: set[str]
) -> list[str]:
    found = []
    for requirement in requirements:
        requirement = requirement.split(";")[0].strip()  # environment markers do not matter here
        match = _REQUIREMENT_NAME.match(requirement)
        if match is None or _normalise(match.group(0)) not in siblings:
            continue
        specifier = requirement[match.end() :].strip().strip("()").replace(" ", "")
        if specifier != f"=={version}":
            found.append(
                f"{where} requires {requirement!r}: siblings must pin the release exactly "
                f"({match.group(0)}=={version})"
            )
    return found


def _tagged_files(root: Path) -> list[Path]:
    found = [root / name for name in _TAG_FILES if (root / name).is_file()]
    for folder in _TAG_FOLDERS:
        for parent, dirs, files in os.walk(root / folder):  # not into .cache (a symlink)
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS and not d.startswith("."))
            found += [Path(parent, f) for f in sorted(files) if Path(f).suffix in _TAG_SUFFIXES]
    return found


def _image_tag_problems(root: Path, version: str) -> list[str]:
    found = []
    for path in _tagged_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for match in _IMAGE_TAG.finditer(text):
            if match.group(1) != version:
                line = text.count("\n", 0, match.start()) + 1
                found.append(
                    f"{path.relative_to(root)}:{line} names the image {match.group(0)!r}, not "
                    f"the release's tag {version!r}"
                )
    return found


def problems(root: Path) -> list[str]:
    """Why ``root`` cannot be released as one version (empty when it can)."""
    members = read_members(root)
    if not members:
        return [f"no packages/*/pyproject.toml under {root}"]
    versions = sorted({m.version for m in members})
    found = []
    if len(versions) > 1:
        listing = ", ".join(f"{m.name} {m.version}" for m in members)
        found.append(f"members disagree on the version ({listing}): all must carry one version")
    version = max(versions, key=versions.count) if len(versions) > 1 else versions[0]
    siblings = {_normalise(m.name) for m in members}
    for member in members:
        found += _sibling_pin_problems(
            f"{member.folder.name}/pyproject.toml", list(member.dependencies), version, siblings
        )
    for member in members:
        for source in sorted((member.folder / "src").rglob("*.py")):
            for match in _SOURCE_VERSION.finditer(source.read_text(encoding="utf-8")):
                if match.group(2) != version:
                    where = source.relative_to(root / "packages")
                    found.append(
                        f"{where} sets {match.group(1)} = {match.group(2)!r}, not {version!r}"
                    )
    found += _image_tag_problems(root, version)
    changelog = root / "CHANGELOG.md"
    if not changelog.is_file():
        found.append("CHANGELOG.md is missing")
    elif not re.search(
        rf"^## \[?{re.escape(version)}\]?", changelog.read_text("utf-8"), re.MULTILINE
    ):
        found.append(f"CHANGELOG.md has no section '## {version}'")
    return found


def _wheel_problems(out: Path, members: list[Member]) -> list[str]:
    siblings = {_normalise(m.name) for m in members}
    found = []
    for member in members:
        stem = f"{member.name.replace('-', '_')}-{member.version}"
        wheels = list(out.glob(f"{stem}-*.whl"))
        if not (out / f"{stem}.tar.gz").is_file():
            found.append(f"no sdist {stem}.tar.gz was built")
        if len(wheels) != 1:
            found.append(f"expected one wheel {stem}-*.whl, found {len(wheels)}")
            continue
        with zipfile.ZipFile(wheels[0]) as wheel:
            metadata = HeaderParser().parsestr(
                wheel.read(f"{stem}.dist-info/METADATA").decode("utf-8")
            )
        found += _sibling_pin_problems(
            wheels[0].name, metadata.get_all("Requires-Dist") or [], member.version, siblings
        )
    return found


def build(root: Path, out: Path) -> list[Path]:
    """Wheels and sdists of every member into ``out`` (emptied first); the artefacts built."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    hatch = shutil.which("hatch")
    # Under `hatch run release:build` HATCH_ENV_ACTIVE=release is set, and a nested `hatch build`
    # in a member folder would look that environment up in the member's (empty) config and fail.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HATCH_ENV")}
    for member in read_members(root):
        command = (
            [hatch, "build", "-t", "wheel", "-t", "sdist", str(out)]
            if hatch is not None
            else [sys.executable, "-m", "hatch", "build", "-t", "wheel", "-t", "sdist", str(out)]
        )
        print(f"release: building {member.name} {member.version}", file=sys.stderr)
        subprocess.run(command, cwd=member.folder, env=env, check=True, stdout=subprocess.DEVNULL)
    return sorted(out.iterdir())


def main(argv: list[str] | None = None) -> int:
    """``check`` or ``build``; exit status 1 (and every reason on stderr) when refusing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["check", "build"])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--out", type=Path, help="folder for the artefacts (default: ROOT/dist)")
    parser.add_argument(
        "--python",
        action="append",
        metavar="X.Y",
        help="wheelhouse only for this CPython version (repeatable; default: every version the "
        "members declare)",
    )
    parser.add_argument(
        "--arch",
        action="append",
        choices=wheelhouse.ARCHES,
        help="wheelhouse for this Linux architecture (repeatable; default: this machine's)",
    )
    parser.add_argument(
        "--no-wheelhouse",
        action="store_true",
        help="build our artefacts only (installing then needs an index for third-party wheels)",
    )
    options = parser.parse_args(argv)
    root = options.root.resolve()
    found = problems(root)
    if found:
        print("release: REFUSED:", file=sys.stderr)
        for problem in found:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    members = read_members(root)
    print(f"release: {len(members)} members agree on version {members[0].version}")
    if options.command == "check":
        return 0
    out = (options.out or root / "dist").resolve()
    artefacts = build(root, out)
    found = _wheel_problems(out, members)
    if found:
        print("release: REFUSED: the built artefacts disagree:", file=sys.stderr)
        for problem in found:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    for artefact in artefacts:
        digest = hashlib.sha256(artefact.read_bytes()).hexdigest()
        print(f"{digest}  {artefact.name}")
    print(f"release: {len(artefacts)} artefacts in {out}")
    if not options.no_wheelhouse:
        server = next(m for m in members if m.folder.name == "bridge-server")
        targets = [
            wheelhouse.Target(python, arch)
            for python in options.python or wheelhouse.default_pythons(server.classifiers)
            for arch in options.arch or [wheelhouse.host_arch()]
        ]
        siblings = {_normalise(m.name) for m in members}
        requirements = wheelhouse.third_party_requirements(
            (d for m in members for d in m.dependencies), siblings
        )
        added = wheelhouse.fill(out, requirements, targets, server.name)
        print(
            f"release: wheelhouse of {len(added)} third-party wheels in {out} for "
            f"{', '.join(map(str, targets))}; install with --no-index --find-links {out}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
