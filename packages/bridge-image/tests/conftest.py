"""Fixtures of the bridge-image tests.

Tests marked ``container`` build and run real images with podman. Where podman is missing they
skip locally and FAIL when ``BRIDGE_REQUIRE_RUNTIME=1`` (CI), so CI cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import NoReturn

import pytest
from bridge_image import BOOTSTRAP_IMAGE, DEFAULT_IMAGE, LABEL_BASE

_PROBE_TIMEOUT = 60  # seconds: the first podman call after boot sets up its storage


def require(reason: str) -> NoReturn:
    """Skip (locally) or fail (``BRIDGE_REQUIRE_RUNTIME=1``) because ``reason`` is missing."""
    if os.environ.get("BRIDGE_REQUIRE_RUNTIME") == "1":
        pytest.fail(f"{reason} (BRIDGE_REQUIRE_RUNTIME=1: container tests must run here)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def podman() -> str:
    """The podman executable, after checking that it can talk to its storage."""
    found = shutil.which("podman")
    if found is None:
        require("podman is not installed (scripts/prepare-host installs it)")
    try:
        subprocess.run([found, "info"], capture_output=True, timeout=_PROBE_TIMEOUT, check=True)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        require(f"podman does not work here: {exc}")
    return found


@pytest.fixture(scope="session")
def offline(podman: str) -> bool:
    """Which path built the existing base image (tests rebuild it the same way, never switch).

    With no base image yet: offline when ``BRIDGE_IMAGE_OFFLINE=1`` or mmdebstrap is installed.
    """
    done = subprocess.run(
        [
            podman,
            "image",
            "inspect",
            "--format",
            f'{{{{index .Labels "{LABEL_BASE}"}}}}',
            DEFAULT_IMAGE,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        return done.stdout.strip().startswith(BOOTSTRAP_IMAGE)
    return os.environ.get("BRIDGE_IMAGE_OFFLINE") == "1" or shutil.which("mmdebstrap") is not None
