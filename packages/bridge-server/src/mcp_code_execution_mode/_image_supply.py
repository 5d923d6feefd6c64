"""The sandbox image before the first sandbox starts: checked against its pin, pulled if need be.

One decision for podman and docker (:func:`bridge_image.supply.supply_image`): a name the
release record (installed with the server, or ``[image] release``) lists must hold the
image it pins, else it is pulled by digest and verified (podman, ``MCP_BRIDGE_IMAGE_PULL=auto``)
or refused; ``registry/path@sha256:...`` is pulled by that digest through the engine when
missing; any other name runs as the store has it. A refusal is a
:class:`~bridge_core.errors.SandboxStartError` naming the image, the expected and the found
digest, and the command that fixes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from bridge_core.errors import SandboxStartError
from bridge_core.runtime.base import IMAGE_BUILD_COMMAND
from bridge_image.errors import ImageError
from bridge_image.release import load_release
from bridge_image.supply import ImageSupply
from bridge_image.supply import supply_image as _decide

from mcp_code_execution_mode.settings import Settings

__all__ = ["check_image", "image_advice", "require_image"]

logger = logging.getLogger(__name__)

IMAGE_PULL_COMMAND = "mcp-code-execution-mode image pull"
_ENGINES = frozenset({"podman", "docker"})


def check_image(
    settings: Settings, runtime: str, progress: Callable[[str], None] | None = None
) -> ImageSupply | None:
    """Which case applies to the configured image (verified, pulled, refused, digest-pinned,
    unknown tag, missing, unchecked), pulling it when that makes it usable.

    None: the runtime runs no images (``local``). Never raises for the image itself: a refusal
    is an :class:`~bridge_image.supply.ImageSupply` whose ``usable`` is False. Blocking: run it
    in a worker thread.
    """
    if runtime not in _ENGINES:
        return None
    try:
        release = load_release(settings.image_release)
    except ImageError as exc:
        # A record that cannot be read pins nothing we could trust: nothing runs unchecked.
        return ImageSupply(
            "refused",
            settings.image,
            f"the release record cannot be read: {exc}",
            "fix or unset [image] release in bridge.toml (reinstall the server for its own record)",
        )
    return _decide(
        settings.image,
        engine=runtime,
        release=release,
        pull=settings.image_pull != "never",
        progress=progress or logger.info,
    )


def require_image(
    settings: Settings, runtime: str, progress: Callable[[str], None] | None = None
) -> ImageSupply | None:
    """Make sure the configured image may run before the first sandbox starts (pulling it when
    that is what makes it usable); the decision, or None when the runtime runs no images.

    Blocking: run it in a worker thread. Raises :class:`SandboxStartError` when the image is
    refused or missing, naming the image, what was expected and found, and the fixing command.
    """
    supplied = check_image(settings, runtime, progress)
    if supplied is None:
        return None
    if not supplied.usable:
        raise SandboxStartError(
            f"sandbox image {settings.image}: {supplied.detail}. Fix: {supplied.fix}"
        )
    if supplied.pulled:
        logger.warning("%s", supplied.detail)
    else:
        logger.info("sandbox image %s: %s", supplied.case, supplied.detail)
    return supplied


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
