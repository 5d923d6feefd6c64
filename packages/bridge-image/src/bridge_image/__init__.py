"""Reproducible builds and digest verification of the MCP code-execution sandbox images.

The image names live in :mod:`bridge_image.names`; ``DEFAULT_IMAGE`` (the standard image) is the
default of ``MCP_BRIDGE_IMAGE``; ``SLIM_IMAGE`` has no data stack. The command line is
``bridge-image`` (:mod:`bridge_image.cli`).
"""

from bridge_image.builder import BuildResult, ImageStatus, build, inputs_hash, status, verify
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
