"""Runtime backends that start hardened sandbox containers (see :mod:`bridge_core.runtime.base`)."""

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

__all__ = [
    "OWNER_LABEL",
    "PRODUCT_LABEL",
    "RuntimeBackend",
    "RuntimeInfo",
    "Sandbox",
    "SandboxExit",
    "SandboxLimits",
    "SandboxSpec",
]
