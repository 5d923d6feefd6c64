"""Creating a podman sandbox container, and refusing one podman did not harden as asked.

The container is created with the options of :func:`._podman_api.create_kwargs`, inspected, and
its system-call filter read back from the OCI spec podman wrote for it (here, or on the engine's
machine over ssh); if any hardening option is missing it is removed and
:class:`~bridge_core.errors.SandboxStartError` names the option. Blocking podman-py calls: run
in a worker thread.
"""

from __future__ import annotations

from pathlib import Path

import podman

from bridge_core.errors import RuntimeUnavailable, SandboxStartError
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime._hardening import container_labels
from bridge_core.runtime._ownership import Owner
from bridge_core.runtime._podman_stdio import remote_seccomp
from bridge_core.runtime._seccomp import SeccompProfile, profile_to_apply
from bridge_core.runtime._ssh import SshLink
from bridge_core.runtime._verify import (
    hardening_violations,
    lifecycle_violations,
    seccomp_violations,
)
from bridge_core.runtime.base import IMAGE_BUILD_COMMAND, SandboxSpec

__all__ = ["create_verified"]


def create_verified(
    client: podman.PodmanClient,
    spec: SandboxSpec,
    name: str,
    *,
    owner: Owner,
    seccomp: SeccompProfile | None,
    seccomp_problem: str,
    link: SshLink | None,
    url: str,
    cgroup_parent: str | None,
    channel_dir: Path | None,
    log_path: Path | None,
) -> bool:
    """Create and verify; then start (socket channel: returns True), or leave it initialised
    for the attach (``channel_dir`` None: the stdio channel, started by the caller)."""
    ours = profile_to_apply(spec.security_opt, seccomp, seccomp_problem)
    labels = container_labels(spec, owner)
    kwargs = api.create_kwargs(
        spec,
        name=name,
        labels=labels,
        channel_dir=channel_dir,
        log_path=log_path,
        seccomp_profile=None if ours is None else ours.path,
    )
    if cgroup_parent is not None:
        kwargs["cgroup_parent"] = cgroup_parent
    try:
        image = client.images.get(spec.image)
    except (api.NotFound, api.ImageNotFound):
        raise SandboxStartError(
            f"sandbox image {spec.image!r} is not in podman's image store: build it with "
            f"`{IMAGE_BUILD_COMMAND}` (the standard image; add --slim for the slim one), or "
            "set MCP_BRIDGE_IMAGE to an image you have"
        ) from None
    except api.FAILURES as exc:
        raise SandboxStartError(
            f"podman at {url} cannot look up image {spec.image!r} (is its API service "
            f"running?): {exc}"
        ) from exc
    try:
        container = client.containers.create(spec.image, **kwargs)
        problems = hardening_violations(
            container.attrs, spec, image_env=image.attrs.get("Config", {}).get("Env") or []
        ) + lifecycle_violations(
            container.attrs,
            log_path=None if log_path is None else str(log_path),
            log_max_bytes=api.LOG_MAX_BYTES,
        )
        if not problems and ours is not None:
            # The filter is only in the OCI spec, which podman writes when it initialises
            # the container (crun reads it there); inspect does not show it for API calls.
            container.init()
            problems = _seccomp_problems(client, link, name, ours)
        if problems:
            api.remove_quietly(client, name)
            raise SandboxStartError(
                f"podman did not apply {'; '.join(problems)} to sandbox container {name}; "
                "refusing to run it (the container was removed)"
            )
        if channel_dir is None:
            if ours is None:
                container.init()  # conmon must be there to attach to
            return False
        container.start()
    except api.FAILURES as exc:
        raise SandboxStartError(
            f"podman could not start sandbox container {name} from {spec.image!r}: {exc}"
        ) from exc
    return True


def _seccomp_problems(
    client: podman.PodmanClient, link: SshLink | None, name: str, ours: SeccompProfile
) -> list[str]:
    try:
        if link is None:
            applied = api.applied_seccomp(client, name)
        else:
            applied = remote_seccomp(client, link, name)
    except (OSError, ValueError, RuntimeUnavailable) as exc:
        return [f"the bridge's seccomp profile (cannot read the OCI spec podman wrote: {exc})"]
    return seccomp_violations(applied, ours.content)
