"""Runtime backends that start hardened sandbox containers (see :mod:`bridge_core.runtime.base`).

``detect_runtime()`` picks one; :class:`PodmanBackend` (podman-py over the API socket),
:class:`DockerBackend` (docker CLI) and :class:`LocalBackend` (NO isolation, tests only) are
importable from their modules.
"""

from bridge_core.runtime.base import (
    OWNER_LABEL,
    PRODUCT_LABEL,
    RuntimeBackend,
    RuntimeInfo,
    Sandbox,
    SandboxExit,
    SandboxLimits,
    SandboxSpec,
)
from bridge_core.runtime.detect import RUNTIME_CHOICES, detect_runtime

__all__ = [
    "OWNER_LABEL",
    "PRODUCT_LABEL",
    "RUNTIME_CHOICES",
    "RuntimeBackend",
    "RuntimeInfo",
    "Sandbox",
    "SandboxExit",
    "SandboxLimits",
    "SandboxSpec",
    "detect_runtime",
]
