"""Check, from a container's inspect data, that every hardening option was really applied.

The runtime's client libraries have silently dropped options before (podman-py ignores
``security_opt=["no-new-privileges"]`` and ``nano_cpus``), so a created container is trusted only
after this check. Works on both podman's and docker's inspect output (same HostConfig keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bridge_core.runtime._hardening import SANDBOX_USER, TMPFS_MODE, ulimits
from bridge_core.runtime._seccomp import applied_profile_problems
from bridge_core.runtime.base import OWNER_LABEL, PRODUCT_LABEL, SandboxSpec

__all__ = [
    "RUNTIME_INJECTED_ENV",
    "hardening_violations",
    "lifecycle_violations",
    "parse_human_size",
    "parse_size",
    "seccomp_violations",
]

RUNTIME_INJECTED_ENV = frozenset({"container", "HOME", "HOSTNAME", "TERM", "PATH"})
"""Variables podman/docker add to every container by themselves (none comes from the host)."""

_NO_NEW_PRIVILEGES = frozenset({"no-new-privileges", "no-new-privileges:true"})
_SANDBOX_TMP = "/tmp"
_MUST_NOT_BE_WRITABLE = ("/run", "/var/tmp")
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_DECIMAL_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9}


def parse_size(text: str) -> int | None:
    """``67108864``, ``64m`` or ``65536k`` → bytes; None if unreadable."""
    text = text.strip().lower()
    number = text.rstrip("bkmg")
    unit = text[len(number) :]
    if not number.isdigit() or unit not in _UNITS:
        return None
    return int(number) * _UNITS[unit]


def parse_human_size(text: object) -> float | None:
    """podman's rounded decimal sizes (``1.049MB``, ``65.54kB``) → bytes; None if unreadable."""
    raw = str(text or "").strip().lower()
    number = raw.rstrip("kmgb")
    factor = _DECIMAL_UNITS.get(raw[len(number) :])
    try:
        return float(number) * factor if factor else None
    except ValueError:
        return None


def _tmpfs_options(inspect: Mapping[str, Any]) -> dict[str, str] | None:
    tmpfs = inspect["HostConfig"].get("Tmpfs") or {}
    if _SANDBOX_TMP not in tmpfs:
        return None
    options: dict[str, str] = {}
    for item in str(tmpfs[_SANDBOX_TMP]).split(","):
        key, _, value = item.partition("=")
        options[key] = value
    return options


def _tmpfs_targets(inspect: Mapping[str, Any]) -> set[str]:
    targets = set((inspect["HostConfig"].get("Tmpfs") or {}).keys())
    targets.update(
        mount.get("Destination", "")
        for mount in inspect.get("Mounts") or ()
        if mount.get("Type") == "tmpfs"
    )
    return targets


def _ulimits(inspect: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    found = {}
    for item in inspect["HostConfig"].get("Ulimits") or ():
        name = str(item.get("Name", "")).lower().removeprefix("rlimit_")
        found[name] = (int(item.get("Soft", -1)), int(item.get("Hard", -1)))
    return found


def _caps_all_dropped(inspect: Mapping[str, Any]) -> bool:
    host = inspect["HostConfig"]
    if host.get("CapAdd") or host.get("Privileged"):
        return False
    dropped = {str(cap).upper().removeprefix("CAP_") for cap in host.get("CapDrop") or ()}
    if "ALL" in dropped:  # docker keeps the literal
        return True
    # podman expands ALL into the default set it would have granted; what counts is that
    # nothing effective is left.
    return "EffectiveCaps" in inspect and not inspect["EffectiveCaps"]


def _env_names(env: Iterable[str]) -> set[str]:
    return {item.partition("=")[0] for item in env}


def hardening_violations(
    inspect: Mapping[str, Any],
    spec: SandboxSpec,
    *,
    image_env: Sequence[str],
    injected_env: frozenset[str] = RUNTIME_INJECTED_ENV,
) -> list[str]:
    """Names of hardening options NOT in effect (empty list: the container may run).

    ``image_env`` is the image's own ``Config.Env``: the container may carry those and the
    variables the runtime injects, nothing else (in particular nothing from the host).
    """
    host = inspect["HostConfig"]
    config = inspect["Config"]
    limits = spec.limits
    problems = []
    if not _caps_all_dropped(inspect):
        problems.append("cap-drop=ALL")
    if not host.get("ReadonlyRootfs"):
        problems.append("read-only root filesystem")
    writable = _tmpfs_targets(inspect) & set(_MUST_NOT_BE_WRITABLE)
    if writable:
        problems.append(f"read-only-tmpfs=false ({', '.join(sorted(writable))} writable)")
    if not _NO_NEW_PRIVILEGES & set(host.get("SecurityOpt") or ()):
        problems.append("no-new-privileges")
    if host.get("NetworkMode") != "none":
        problems.append(f"network=none (got {host.get('NetworkMode')!r})")
    if config.get("User") != SANDBOX_USER:
        problems.append(f"user {SANDBOX_USER} (got {config.get('User')!r})")
    if host.get("Memory") != limits.memory_bytes:
        problems.append(f"memory={limits.memory_bytes}")
    if host.get("MemorySwap") != limits.memory_bytes:
        problems.append(f"memory-swap={limits.memory_bytes}")
    if host.get("PidsLimit") != limits.pids:
        problems.append(f"pids-limit={limits.pids}")
    if limits.cpu_quota is not None and (
        host.get("CpuQuota") != limits.cpu_quota or host.get("CpuPeriod") != limits.cpu_period
    ):
        problems.append(f"cpu-quota={limits.cpu_quota}/cpu-period={limits.cpu_period}")
    tmp = _tmpfs_options(inspect)
    if (
        tmp is None
        or parse_size(tmp.get("size", "")) != limits.tmpfs_bytes
        or tmp.get("mode") != TMPFS_MODE
    ):
        problems.append(f"tmpfs /tmp size={limits.tmpfs_bytes} mode={TMPFS_MODE}")
    if not host.get("Init"):
        problems.append("init")
    found = _ulimits(inspect)
    for want in ulimits(limits):
        if found.get(want.name) != (want.soft, want.hard):
            problems.append(f"ulimit {want.name}={want.soft}:{want.hard}")
    labels = config.get("Labels") or {}
    if PRODUCT_LABEL not in labels or OWNER_LABEL not in labels:
        problems.append("ownership labels")
    foreign = _env_names(config.get("Env") or ()) - _env_names(image_env) - injected_env
    if foreign:
        problems.append(f"empty environment (found {', '.join(sorted(foreign))})")
    return problems


def lifecycle_violations(
    inspect: Mapping[str, Any], *, log_path: str | None, log_max_bytes: int
) -> list[str]:
    """What keeps a podman sandbox from leaving anything behind, NOT in effect.

    Auto-removal: once the sandbox ends (killed, or exited because its bridge is gone) podman
    deletes the container without the bridge. A capped log at ``log_path``: the output sandbox
    code can write to its log fds stays bounded on the host's disk. ``log_path`` None (the
    channel is the container's stdio, which a log would copy to disk frame by frame): no log at
    all (driver ``none``).
    """
    host = inspect["HostConfig"]
    problems = []
    if host.get("AutoRemove") is not True:
        problems.append("auto-remove (--rm)")
    log = host.get("LogConfig") or {}
    if log_path is None:
        if log.get("Type") != "none":
            problems.append("no container log (--log-driver=none)")
        return problems
    size = parse_human_size(log.get("Size"))
    # podman prints the cap rounded to 4 digits: allow that rounding, nothing more.
    if log.get("Path") != log_path or size is None or not 0 < size <= log_max_bytes * 1.001:
        problems.append(f"log path {log_path} capped at {log_max_bytes} bytes")
    return problems


def seccomp_violations(applied: Mapping[str, Any] | None, expected: Mapping[str, Any]) -> list[str]:
    """The bridge's system-call filter as a missing option, if ``applied`` is not it.

    ``applied`` is what the runtime will load (podman: the OCI spec's ``linux.seccomp``;
    docker: the profile it keeps in ``SecurityOpt``), ``expected`` the profile the bridge wrote.
    """
    if applied is None:
        return ["the bridge's seccomp profile (not applied)"]
    problems = applied_profile_problems(applied, expected)
    return [f"the bridge's seccomp profile ({'; '.join(problems)})"] if problems else []
