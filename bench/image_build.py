"""Build times of the sandbox image: cold, warm, after a sandbox-client change, no-op check.

    hatch run image:python bench/image_build.py [--offline] [--bootstrap] [--standard]

bootstrap  (--bootstrap) the offline base rebuilt: mmdebstrap, then the image; same ID?
cold       every layer of the slim image rebuilt (--no-cache) on the existing base
warm       nothing changed: every layer from the cache (wheels are still built on the host)
client     a copy of the repository with one sandbox-client file changed: only the last layers
status     the up-to-date check prepare-host runs on every call

Builds go to scratch tags, removed at the end; the standard tags are left alone.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bridge_image import BOOTSTRAP_IMAGE, build, status
from bridge_image._bootstrap import ensure_bootstrap
from bridge_image._inputs import find_repo
from bridge_image._run import image_inspect

_SCRATCH = "localhost/mcp-bridge-bench:{}"
_INPUTS = [
    "images",
    "packages/bridge-protocol",
    "packages/bridge-sandbox-client",
    "packages/bridge-image/src",
]


def _timed(label: str, action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    seconds = time.monotonic() - started
    print(f"{label:<34} {seconds:8.1f} s", flush=True)
    return seconds


def _changed_copy(repo: Path, target: Path) -> Path:
    for path in _INPUTS:
        shutil.copytree(repo / path, target / path, ignore=shutil.ignore_patterns("tests"))
    client = target / "packages/bridge-sandbox-client/src/bridge_sandbox_client/__init__.py"
    client.write_text(client.read_text() + f"\n# bench {time.time()}\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="the offline (bootstrap) path")
    parser.add_argument("--bootstrap", action="store_true", help="also rebuild the bootstrap base")
    parser.add_argument("--standard", action="store_true", help="also the standard image")
    options = parser.parse_args()
    repo = find_repo()
    tags: list[str] = []

    def scratch(name: str) -> str:
        tags.append(_SCRATCH.format(name))
        return tags[-1]

    print(f"path: {'offline' if options.offline else 'normal'}")
    try:
        if options.bootstrap:
            before = image_inspect("podman", BOOTSTRAP_IMAGE) or {}
            cache = repo / ".cache/bridge-image"
            _timed(
                "bootstrap rootfs (mmdebstrap+build)",
                lambda: ensure_bootstrap(repo, cache, podman="podman", rebuild=True),
            )
            after = image_inspect("podman", BOOTSTRAP_IMAGE) or {}
            print(f"bootstrap reproduced: {before.get('Id') == after.get('Id')}")
        _timed(
            "cold (--no-cache)",
            lambda: build("slim", offline=options.offline, no_cache=True, tag=scratch("cold")),
        )
        _timed(
            "warm (nothing changed)",
            lambda: build("slim", offline=options.offline, tag=scratch("warm")),
        )
        with tempfile.TemporaryDirectory() as tmp:
            copy = _changed_copy(repo, Path(tmp))
            _timed(
                "warm (sandbox client changed)",
                lambda: build("slim", offline=options.offline, repo=copy, tag=scratch("client")),
            )
        _timed("status check (prepare-host no-op)", lambda: status("slim", offline=options.offline))
        if options.standard:
            _timed(
                "standard (cache as found)",
                lambda: build("standard", offline=options.offline, tag=scratch("std")),
            )
    finally:
        for tag in tags:
            subprocess.run(["podman", "rmi", tag], capture_output=True, check=False)


if __name__ == "__main__":
    main()
