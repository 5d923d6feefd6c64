"""Reproducible builds and digest verification of the MCP code-execution sandbox images.

The image names live in :mod:`bridge_image.names`; ``DEFAULT_IMAGE`` (the standard image) is the
default of ``MCP_BRIDGE_IMAGE``; ``SLIM_IMAGE`` has no data stack. The command line is
``bridge-image`` (:mod:`bridge_image.cli`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from bridge_image.errors import BuildFailed, DigestMismatch, ImageError, MissingInput, MissingTool
from bridge_image.names import (
    BOOTSTRAP_IMAGE,
    DEFAULT_IMAGE,
    IMAGE_VERSION,
    LABEL_BASE,
    LABEL_INPUTS_HASH,
    LABEL_PROTOCOL_VERSIONS,
    LABEL_REVISION,
    LABEL_SANDBOX_CLIENT_VERSION,
    LABEL_TITLE,
    LABEL_VARIANT,
    LABEL_VERSION,
    SLIM_IMAGE,
)

if TYPE_CHECKING:  # imported on first use: see _LAZY
    from bridge_image.builder import BuildResult, ImageStatus, build, inputs_hash, status, verify

__version__ = "0.1.0"

__all__ = [
    "BOOTSTRAP_IMAGE",
    "DEFAULT_IMAGE",
    "IMAGE_VERSION",
    "LABEL_BASE",
    "LABEL_INPUTS_HASH",
    "LABEL_PROTOCOL_VERSIONS",
    "LABEL_REVISION",
    "LABEL_SANDBOX_CLIENT_VERSION",
    "LABEL_TITLE",
    "LABEL_VARIANT",
    "LABEL_VERSION",
    "SLIM_IMAGE",
    "BuildFailed",
    "BuildResult",
    "DigestMismatch",
    "ImageError",
    "ImageStatus",
    "MissingInput",
    "MissingTool",
    "__version__",
    "build",
    "inputs_hash",
    "status",
    "verify",
]

_LAZY = {
    "BuildResult": "bridge_image.builder",
    "ImageStatus": "bridge_image.builder",
    "build": "bridge_image.builder",
    "inputs_hash": "bridge_image.builder",
    "status": "bridge_image.builder",
    "verify": "bridge_image.builder",
}
"""Names whose modules are imported on first use: the builder pulls in podman-py and requests, which
the bridge's start (it reads only the image names) must not pay for."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
