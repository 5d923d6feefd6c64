"""The sandbox image on first use: pulled by digest and verified when it is missing and released.

The release record installed with the server (or ``MCP_BRIDGE_IMAGE_RELEASE``) names each
published image by digest and the key that signed it (:mod:`bridge_image.release`). When the
configured image is not in podman's store and the record has it, it is pulled by that digest and
its signature verified before anything runs (:func:`bridge_image.pull.pull_released`); a refusal
is a :class:`~bridge_core.errors.SandboxStartError` saying why. Images the record does not know,
``MCP_BRIDGE_IMAGE_PULL=never`` (air-gapped) and runtimes other than podman keep the local build.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bridge_core.errors import SandboxStartError
from bridge_core.runtime.base import IMAGE_BUILD_COMMAND
from bridge_image.errors import ImageError, MissingTool
from bridge_image.pull import image_present, pull_released
from bridge_image.release import load_release

from mcp_code_execution_mode.settings import Settings

__all__ = ["image_advice", "supply_image"]

logger = logging.getLogger(__name__)

IMAGE_PULL_COMMAND = "mcp-code-execution-mode image pull"


def supply_image(
    settings: Settings, runtime: str, progress: Callable[[str], None] | None = None
) -> str | None:
    """Pull the configured image if it is missing and released; say what was pulled.

    None: nothing to do (present, not released, pulls off, not podman). Blocking: run it in a
    worker thread. Raises :class:`SandboxStartError` when the pull is refused.
    """
    if runtime != "podman" or settings.image_pull == "never":
        return None
    try:
        present = image_present(settings.image)
    except MissingTool:
        return None  # a remote podman API without the CLI here: the runtime reports the image
    if present:
        return None
    try:
        release = load_release(settings.image_release)
        if release is None or release.find(settings.image) is None:
            return None
        logger.warning("sandbox image %s is missing: pulling the released image", settings.image)
        pulled = pull_released(settings.image, release, progress=progress or logger.info)
    except ImageError as exc:
        raise SandboxStartError(f"sandbox image {settings.image}: {exc}") from None
    done = f"pulled {pulled.published.pinned} (digest and signature verified) as {settings.image}"
    logger.warning("%s", done)
    return done


def image_advice(settings: Settings) -> str:
    """What to do when the image's sandbox client speaks no protocol version of this server."""
    try:
        release = load_release(settings.image_release)
    except ImageError:
        release = None
    published = release.find(settings.image) if release is not None else None
    if published is not None:
        return (
            f"pull the image released with this server: `{IMAGE_PULL_COMMAND} --image "
            f"{settings.image}` ({published.pinned})"
        )
    return (
        f"rebuild it for this server: `{IMAGE_BUILD_COMMAND}` (a custom image: rebuild it FROM "
        "the base of this release, `mcp-code-execution-mode image base`, and check it with "
        "`mcp-code-execution-mode image verify --image NAME`)"
    )
