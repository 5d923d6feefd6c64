"""The offline base: a Debian root filesystem from mmdebstrap, built into a local image."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bridge_image import _debian
from bridge_image._inputs import DEFAULT_EPOCH
from bridge_image._run import Progress, append_labels, image_inspect, require_tool, run_streamed
from bridge_image.names import BOOTSTRAP_IMAGE, LABEL_INPUTS_HASH

__all__ = ["BOOTSTRAP_EPOCH", "bootstrap_inputs_hash", "ensure_bootstrap"]

BOOTSTRAP_EPOCH = DEFAULT_EPOCH
"""A fixed timestamp, so the root filesystem depends only on the mirror's packages (mmdebstrap
is reproducible with SOURCE_DATE_EPOCH: two runs gave the same tarball)."""


_DPKG_OPTIONS = (
    # Documentation nobody reads in a sandbox, as in Debian's slim images (copyrights stay).
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/locale/*",
)


def _inputs(repo: Path, mirror: str | None) -> tuple[list[str], list[str], str]:
    listed = (repo / "images/sandbox/system-packages.txt").read_text().splitlines()
    packages = _debian.include_list(p.strip() for p in listed if p.strip() and p[0] != "#")
    debian, security = _debian.find_mirrors()
    sources = _debian.source_lines(mirror or debian, security)
    digest = hashlib.sha256()
    for part in [*packages, *sources, *_DPKG_OPTIONS, str(BOOTSTRAP_EPOCH)]:
        digest.update(part.encode() + b"\0")
    digest.update((repo / "images/bootstrap/Containerfile").read_bytes())
    # This module is the rest of the recipe (mmdebstrap options, how the image is made).
    digest.update(Path(__file__).read_bytes())
    return packages, sources, digest.hexdigest()


def bootstrap_inputs_hash(repo: Path, mirror: str | None = None) -> str:
    """sha256 over what decides the bootstrap root filesystem: packages, mirrors, timestamp."""
    return _inputs(repo, mirror)[2]


def ensure_bootstrap(
    repo: Path,
    cache: Path,
    *,
    podman: str,
    mirror: str | None = None,
    rebuild: bool = False,
    progress: Progress | None = None,
) -> str:
    """Return the ID of the bootstrap image, building it first if absent or stale.

    The root filesystem is made in a fresh directory under ``cache`` and deleted afterwards.
    ``mirror`` overrides the Debian mirror found in the host's apt sources (for example a
    snapshot.debian.org URL, which pins every package version).
    """
    packages, sources, inputs_hash = _inputs(repo, mirror)
    found = image_inspect(podman, BOOTSTRAP_IMAGE)
    if found and not rebuild and (found.get("Labels") or {}).get(LABEL_INPUTS_HASH) == inputs_hash:
        return str(found["Id"])
    mmdebstrap = require_tool(
        "mmdebstrap", "install it (apt-get install mmdebstrap) or run scripts/prepare-host"
    )
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bootstrap-", dir=cache))
    try:
        if progress:
            progress(f"bootstrap: mmdebstrap {_debian.SUITE} from {sources[0].split()[1]}")
        run_streamed(
            [
                mmdebstrap,
                "--variant=essential",
                f"--include={','.join(packages)}",
                *(f"--dpkgopt={option}" for option in _DPKG_OPTIONS),
                _debian.SUITE,
                str(work / "rootfs.tar"),
                *sources,
            ],
            progress=progress,
            what="mmdebstrap",
            env={**os.environ, "SOURCE_DATE_EPOCH": str(BOOTSTRAP_EPOCH)},
        )
        shutil.copy2(repo / "images/bootstrap/Containerfile", work / "Containerfile")
        append_labels(work / "Containerfile", {LABEL_INPUTS_HASH: inputs_hash})
        run_streamed(
            [
                podman,
                "build",
                "--pull=never",
                "--network=none",
                "--identity-label=false",
                f"--timestamp={BOOTSTRAP_EPOCH}",
                f"--tag={BOOTSTRAP_IMAGE}",
                str(work),
            ],
            progress=progress,
            what="importing the bootstrap root filesystem",
        )
    finally:
        # The tarball is ~270 MB and lives on in the image: do not keep a second copy.
        shutil.rmtree(work, ignore_errors=True)
    built = image_inspect(podman, BOOTSTRAP_IMAGE)
    assert built is not None
    if found and found["Id"] != built["Id"]:
        # Untagged now; podman refuses (harmlessly) while images built FROM it remain.
        subprocess.run([podman, "rmi", found["Id"]], capture_output=True, check=False)
    return str(built["Id"])
