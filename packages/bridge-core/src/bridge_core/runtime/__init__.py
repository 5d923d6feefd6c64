"""Runtime backends that start hardened sandbox containers (see :mod:`bridge_core.runtime.base`).

:func:`detect_runtime` picks and connects one: :class:`PodmanBackend` (podman-py over the API
socket), :class:`DockerBackend` (docker CLI) or, only when asked for, :class:`LocalBackend`
(NO isolation, tests and development only). See ``docs/runtime.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bridge_core._lazy import lazy_exports
from bridge_core.runtime._locality import (
    PLATFORMS_GUIDE,
    host_system,
    kernel_problem,
    platform_problem,
    process_problem,
)
from bridge_core.runtime._seccomp import user_seccomp_option
from bridge_core.runtime.base import (
    IMAGE_BUILD_COMMAND,
    OWNER_LABEL,
    PRODUCT_LABEL,
    RuntimeBackend,
    RuntimeInfo,
    Sandbox,
    SandboxExit,
    SandboxLimits,
    SandboxSpec,
    SharedDir,
)

if TYPE_CHECKING:  # imported on first use: see _LAZY
    from bridge_core.runtime.detect import RUNTIME_CHOICES, detect_runtime
    from bridge_core.runtime.docker import DockerBackend
    from bridge_core.runtime.local import LocalBackend
    from bridge_core.runtime.podman import PodmanBackend

__all__ = [
    "IMAGE_BUILD_COMMAND",
    "OWNER_LABEL",
    "PLATFORMS_GUIDE",
    "PRODUCT_LABEL",
    "RUNTIME_CHOICES",
    "DockerBackend",
    "LocalBackend",
    "PodmanBackend",
    "RuntimeBackend",
    "RuntimeInfo",
    "Sandbox",
    "SandboxExit",
    "SandboxLimits",
    "SandboxSpec",
    "SharedDir",
    "detect_runtime",
    "host_system",
    "kernel_problem",
    "platform_problem",
    "process_problem",
    "user_seccomp_option",
]

_LAZY = {
    "RUNTIME_CHOICES": "bridge_core.runtime.detect",
    "detect_runtime": "bridge_core.runtime.detect",
    "DockerBackend": "bridge_core.runtime.docker",
    "LocalBackend": "bridge_core.runtime.local",
    "PodmanBackend": "bridge_core.runtime.podman",
}
"""Names whose modules are imported on first use: the backends pull in podman-py (requests,
urllib3), which the server must not import before it answers ``initialize``."""


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
