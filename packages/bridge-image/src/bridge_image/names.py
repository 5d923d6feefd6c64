"""Image names and label keys: the ONE place other packages and scripts take them from."""

from __future__ import annotations

__all__ = [
    "BOOTSTRAP_IMAGE",
    "DEFAULT_IMAGE",
    "IMAGE_COMMAND",
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
]

IMAGE_COMMAND = "mcp-code-execution-mode image"
"""The image command line as an installed server names it (``bridge-image`` in a checkout): the
prefix of every command a message tells a user to run."""

IMAGE_VERSION = "0.1.0"
"""The image tag: the version of the packages, released in lockstep."""

DEFAULT_IMAGE = f"localhost/mcp-bridge-sandbox:{IMAGE_VERSION}"
"""The standard sandbox image, the default of ``MCP_BRIDGE_IMAGE``: the slim image plus the
common data stack (numpy, pandas, matplotlib, scipy, scikit-learn, …)."""

SLIM_IMAGE = f"localhost/mcp-bridge-sandbox-slim:{IMAGE_VERSION}"
"""Python, the sandbox client and the CLI tools only: what the standard image builds FROM."""

BOOTSTRAP_IMAGE = "localhost/mcp-bridge-bootstrap:trixie"
"""The local Debian root filesystem the offline path builds FROM (no registry needed)."""

_PREFIX = "io.github.mcp-code-execution-mode.image"
# Deliberately NOT the bare product label that the runtime puts on its containers: containers
# inherit image labels, and that label marks containers the bridge owns and may remove.

LABEL_VARIANT = f"{_PREFIX}.variant"
LABEL_PROTOCOL_VERSIONS = f"{_PREFIX}.protocol-versions"
"""Comma-separated protocol versions the image's sandbox client speaks, e.g. ``"1"``."""
LABEL_SANDBOX_CLIENT_VERSION = f"{_PREFIX}.sandbox-client-version"
LABEL_INPUTS_HASH = f"{_PREFIX}.inputs-hash"
"""sha256 over every build input; a differing value means the image is stale."""
LABEL_REVISION = "org.opencontainers.image.revision"
"""Git commit of the last change to the image's inputs (``+dirty`` if uncommitted changes)."""
LABEL_VERSION = "org.opencontainers.image.version"
LABEL_TITLE = "org.opencontainers.image.title"
LABEL_BASE = "org.opencontainers.image.base.name"
