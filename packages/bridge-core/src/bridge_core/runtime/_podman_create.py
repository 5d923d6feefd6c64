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

from bridge_core._ownership import Owner
from bridge_core.errors import RuntimeUnavailable, SandboxStartError
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime._hardening import container_labels
from bridge_core.runtime._podman_stdio import remote_seccomp
from bridge_core.runtime._seccomp import SeccompProfile, profile_to_apply
from bridge_core.runtime._ssh import SshLink
from bridge_core.runtime._verify import (
    hardening_violations,
    lifecycle_violations,
    seccomp_violations,
)
from bridge_core.runtime.base import IMAGE_BUILD_COMMAND, SandboxSpec

__all__ = ["ImageEnvs", "create_verified"]

MAX_IMAGES = 32
"""Images whose environment :class:`ImageEnvs` keeps (a bridge uses one or two)."""


class ImageEnvs:
    """The environment of each image a sandbox was created from, by image ID.

    An ID names the image's content, so what is kept can never be stale: a rebuilt image under
    the same name has a new ID and is looked up once. Saves the API call that read the image
    before every container start (15-20 ms of a ~260 ms start, measured on the test machine).
    """

    def __init__(self) -> None:
        self._envs: dict[str, list[str]] = {}

    def get(self, client: podman.PodmanClient, image_id: str) -> list[str]:
        env = self._envs.get(image_id)
        if env is None:
            env = client.images.get(image_id).attrs.get("Config", {}).get("Env") or []
            if len(self._envs) >= MAX_IMAGES:
                self._envs.clear()
            self._envs[image_id] = env
        return env


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
    image_envs: ImageEnvs,
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
        # From the ID checked under the name when there is one (a re-tag after the check must
        # not swap the image); the name is what messages show.
        container = client.containers.create(spec.source, **kwargs)
    except api.FAILURES as exc:
        # podman 4.3 answers a missing image with a 500 ("image not known"): asked only now, a
        # start pays no lookup of its image (see ImageEnvs).
        if not _image_exists(client, spec.source):
            checked = f" (checked as {spec.image_id})" if spec.image_id else ""
            raise SandboxStartError(
                f"sandbox image {spec.image!r}{checked} is not in podman's image store: build "
                f"it with `{IMAGE_BUILD_COMMAND}` (the standard image; add --slim for the slim "
                "one), or set MCP_BRIDGE_IMAGE to an image you have"
            ) from None
        raise SandboxStartError(
            f"podman at {url} could not create sandbox container {name} from {spec.image!r} "
            f"(is its API service running?): {exc}"
        ) from exc
    try:
        image_env = image_envs.get(client, str(container.attrs.get("Image") or spec.source))
        problems = hardening_violations(
            container.attrs, spec, image_env=image_env
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


def _image_exists(client: podman.PodmanClient, image: str) -> bool:
    """Whether ``image`` is in the store (True when that cannot be told either)."""
    try:
        return bool(client.images.exists(image))
    except api.FAILURES:
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
