"""The hardening every sandbox container gets, as pure data (no runtime calls).

One place decides names, labels, user, ulimits and tmpfs options; the podman and docker backends
translate this into their own call shapes and :mod:`._verify` checks the result by inspection.
The labels are read back here too: which containers are leftovers of dead bridges.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from bridge_core._ownership import Owner, owner_is_alive, parse_owner
from bridge_core.runtime.base import OWNER_LABEL, PRODUCT_LABEL, SandboxLimits, SandboxSpec

__all__ = [
    "CONTAINER_NAME_PREFIX",
    "LOG_MAX_BYTES",
    "PRODUCT_LABEL_VALUE",
    "SANDBOX_USER",
    "TMPFS_MODE",
    "ContainerRecord",
    "Ulimit",
    "container_labels",
    "container_name",
    "format_bytes",
    "select_leftovers",
    "ulimits",
]

CONTAINER_NAME_PREFIX = "mcp-bridge-"
SANDBOX_USER = "65534:65534"
"""nobody:nogroup: exists in every Debian-based image, owns nothing in it."""
LOG_MAX_BYTES = 1024 * 1024
"""Cap of a sandbox's container log (the runtime truncates or rotates it there). The sandbox
client sends user output over its channel, but code can still write to the fds the log captures:
without a cap (podman's default, docker's json-file default) a sandbox could fill the host's
disk through its log."""
TMPFS_MODE = "1777"
"""/tmp is world-writable with the sticky bit, like on any Linux host."""
PRODUCT_LABEL_VALUE = "sandbox"
"""Value of :data:`~bridge_core.runtime.base.PRODUCT_LABEL` on every sandbox container."""

_NAME_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]+")
_NAME_MAX = 40  # keeps the per-sandbox socket path short (unix socket paths max out at 107 bytes)


@dataclass(frozen=True, slots=True)
class Ulimit:
    """One resource limit (soft = hard: the sandbox cannot raise it back)."""

    name: str
    soft: int
    hard: int


def container_name(spec_name: str) -> str:
    """A unique container name: the prefix, the sandbox name made safe, a random suffix.

    The suffix matters: two bridges on one host both start a sandbox called ``default``.
    """
    safe = _NAME_UNSAFE.sub("-", spec_name).strip("-.")[:_NAME_MAX] or "sandbox"
    return f"{CONTAINER_NAME_PREFIX}{safe}-{secrets.token_hex(4)}"


def container_labels(spec: SandboxSpec, owner: Owner) -> dict[str, str]:
    """The spec's labels plus ours; ours win so a setting can never forge ownership."""
    return {**spec.labels, PRODUCT_LABEL: PRODUCT_LABEL_VALUE, OWNER_LABEL: owner.label}


@dataclass(frozen=True, slots=True)
class ContainerRecord:
    """What leftover selection needs to know about one container."""

    name: str
    labels: Mapping[str, str]


def select_leftovers(
    containers: Iterable[ContainerRecord],
    *,
    is_alive: Callable[[Owner], bool] = owner_is_alive,
) -> list[str]:
    """Names of our containers whose owner bridge is gone.

    Containers without our product label, or with a missing or malformed owner label, are never
    selected: removing a container we cannot attribute could kill another bridge's live session.
    """
    leftovers = []
    for record in containers:
        if record.labels.get(PRODUCT_LABEL) != PRODUCT_LABEL_VALUE:
            continue
        owner = parse_owner(record.labels.get(OWNER_LABEL))
        if owner is not None and not is_alive(owner):
            leftovers.append(record.name)
    return leftovers


def ulimits(limits: SandboxLimits) -> list[Ulimit]:
    """nofile AND nproc, always both.

    Podman's API replaces ALL default ulimits as soon as a request sets any one of them; without
    an explicit nofile the container inherits the host's hard limit and, as root without
    CAP_SYS_RESOURCE, crun fails with ``setrlimit RLIMIT_NOFILE: Operation not permitted``.
    """
    return [
        Ulimit("nofile", limits.nofile, limits.nofile),
        Ulimit("nproc", limits.nproc, limits.nproc),
    ]


def format_bytes(size: int) -> str:
    """``536870912`` → ``512m``: the unit users write in MCP_BRIDGE_MEMORY_LIMIT."""
    for suffix, factor in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{suffix}"
    return f"{size}b"
