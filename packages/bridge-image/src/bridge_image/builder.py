"""Build, check and verify the sandbox images (the library behind the ``bridge-image`` CLI)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bridge_image import _bootstrap
from bridge_image._inputs import build_epoch, cache_dir, find_repo, hash_files, hash_tree
from bridge_image._recipes import (
    RECIPES,
    Recipe,
    Variant,
    project_version,
    protocol_versions,
    recipe_revision,
)
from bridge_image._run import (
    Progress,
    append_labels,
    image_inspect,
    require_tool,
    run_streamed,
)
from bridge_image._wheels import build_repo_wheels, fetch_pinned_wheels, wheel_arch
from bridge_image.errors import BuildFailed, DigestMismatch, MissingInput
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

__all__ = [
    "OFFLINE_ENV",
    "BuildResult",
    "ImageStatus",
    "build",
    "default_offline",
    "inputs_hash",
    "status",
    "verify",
]

OFFLINE_ENV = "BRIDGE_IMAGE_OFFLINE"
"""``1`` selects the offline path, ``0`` the normal path, for every command."""

_PODMAN_HINT = "install podman (apt-get install podman) or run scripts/prepare-host"


@dataclass(frozen=True, slots=True)
class BuildResult:
    """A built (or found up to date) image."""

    tag: str
    image_id: str
    """``sha256:`` of the image config: covers every layer and label."""
    digest: str
    """``sha256:`` of the image manifest, as podman reports it."""
    labels: Mapping[str, str] = field(default_factory=dict)
    built: bool = True
    """False when ``if_stale`` found the image up to date and nothing was built."""
    seconds: float = 0.0
    layers: tuple[str, ...] = ()
    """Uncompressed digests of the layers, base first."""


@dataclass(frozen=True, slots=True)
class ImageStatus:
    """Whether an image exists and matches the current inputs."""

    tag: str
    expected_inputs_hash: str
    present: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    expected_revision: str | None = None
    """The revision label a build would carry now (None: not compared)."""

    @property
    def stale(self) -> bool:
        """True if the image is absent, was built from other inputs, or carries another revision
        (the same content first built uncommitted, then committed: relabelling is cheap)."""
        if not self.present or self.labels.get(LABEL_INPUTS_HASH) != self.expected_inputs_hash:
            return True
        revision = self.labels.get(LABEL_REVISION)
        return self.expected_revision is not None and revision != self.expected_revision


def _podman() -> str:
    return require_tool("podman", _PODMAN_HINT)


def default_offline(offline: bool | None = None) -> bool:
    """Resolve the build path: ``offline`` if given, else ``BRIDGE_IMAGE_OFFLINE`` (1/0), else
    the path the existing images were built with (so a plain ``build --if-stale`` never
    switches paths), else the normal path."""
    if offline is not None:
        return offline
    env = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if env:
        return env in {"1", "true", "yes"}
    podman = _podman()
    found = image_inspect(podman, DEFAULT_IMAGE) or image_inspect(podman, SLIM_IMAGE)
    base = str(((found or {}).get("Labels") or {}).get(LABEL_BASE, ""))
    return base.startswith(BOOTSTRAP_IMAGE)


def inputs_hash(
    variant: Variant = "standard", *, offline: bool = False, repo: Path | None = None
) -> str:
    """sha256 over everything that decides the image: files, base, platform, builder version
    (and, on the offline path, the bootstrap base's own inputs)."""
    root = repo or find_repo()
    recipe = RECIPES[variant]
    digest = hashlib.sha256()
    parts = [
        recipe.variant,
        IMAGE_VERSION,
        wheel_arch(),
        hash_tree(root, recipe.inputs),
        f"offline={offline}",
    ]
    if offline:
        parts.append(_bootstrap.bootstrap_inputs_hash(root))
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def status(
    variant: Variant = "standard",
    *,
    offline: bool | None = None,
    repo: Path | None = None,
    tag: str | None = None,
) -> ImageStatus:
    """Inspect the variant's image (or ``tag``) and compare its inputs-hash label with the
    current inputs.

    ``offline=None``: the path of :func:`default_offline`.
    """
    recipe = RECIPES[variant]
    root = repo or find_repo()
    expected = inputs_hash(variant, offline=default_offline(offline), repo=root)
    target = tag or recipe.tag
    found = image_inspect(_podman(), target)
    labels = dict((found or {}).get("Labels") or {})
    revision = recipe_revision(root, recipe)
    return ImageStatus(target, expected, found is not None, labels, revision)


def _result(podman: str, tag: str, *, built: bool, started: float) -> BuildResult:
    found = image_inspect(podman, tag)
    if found is None:
        raise MissingInput(f"podman reports no image {tag} right after building it")
    return BuildResult(
        tag=tag,
        image_id=f"sha256:{found['Id']}" if ":" not in found["Id"] else str(found["Id"]),
        digest=str(found.get("Digest", "")),
        labels=dict(found.get("Labels") or {}),
        built=built,
        seconds=time.monotonic() - started,
        layers=tuple((found.get("RootFS") or {}).get("Layers") or ()),
    )


def _copy_context(root: Path, recipe: Recipe, context: Path) -> None:
    if context.exists():
        shutil.rmtree(context)
    (context / "wheels").mkdir(parents=True)
    for name in recipe.context_files:
        source = root / recipe.directory / name
        if not source.is_file():
            raise MissingInput(f"{source} is missing")
        shutil.copy2(source, context / name)


def _build_args(
    root: Path,
    recipe: Recipe,
    context: Path,
    *,
    offline: bool,
    expected: str,
    revision: str,
    progress: Progress | None,
    podman: str,
) -> tuple[dict[str, str], dict[str, str]]:
    """The build args and the variable labels of one build (after fetching its wheels)."""
    cache = cache_dir(root)
    third_party = fetch_pinned_wheels(
        context / "requirements.txt",
        context / "wheels/third-party",
        cache=cache / "wheels",
        progress=progress,
    )
    args = {
        # Also a build arg: --timestamp alone is not part of buildah's layer cache key.
        "SOURCE_DATE_EPOCH": str(build_epoch()),
        "THIRD_PARTY_HASH": hash_files([context / "requirements.txt", *third_party]),
    }
    labels = {
        LABEL_VERSION: IMAGE_VERSION,
        LABEL_REVISION: revision,
        LABEL_INPUTS_HASH: expected,
        LABEL_VARIANT: recipe.variant,
        LABEL_TITLE: recipe.title,
    }
    if recipe.data_stack:
        data_stack = fetch_pinned_wheels(
            context / "data-stack.txt",
            context / "wheels/data-stack",
            cache=cache / "wheels",
            progress=progress,
        )
        args["DATA_STACK_HASH"] = hash_files([context / "data-stack.txt", *data_stack])
    if offline:
        bootstrap_id = _bootstrap.ensure_bootstrap(
            root, cache / "bootstrap", podman=podman, progress=progress
        )
        args["BASE_IMAGE"] = BOOTSTRAP_IMAGE
        labels[LABEL_BASE] = f"{BOOTSTRAP_IMAGE}@sha256:{bootstrap_id.removeprefix('sha256:')}"
    else:
        labels[LABEL_BASE] = _default_base(context / "Containerfile")
    wheels = build_repo_wheels(
        [root / p for p in recipe.projects],
        context / "wheels/bridge",
        epoch=build_epoch(),
        progress=progress,
    )
    args["SYSTEM_PACKAGES_HASH"] = hash_files(
        [context / "system-packages.txt", context / "install-system-packages"]
    )
    args["BRIDGE_WHEELS_HASH"] = hash_files(wheels)
    labels[LABEL_PROTOCOL_VERSIONS] = protocol_versions(root)
    labels[LABEL_SANDBOX_CLIENT_VERSION] = project_version(root)
    return args, labels


def _default_base(containerfile: Path) -> str:
    for line in containerfile.read_text().splitlines():
        if line.startswith("ARG BASE_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise MissingInput(f"{containerfile} has no `ARG BASE_IMAGE=` default")


def build(
    variant: Variant = "standard",
    *,
    offline: bool | None = None,
    if_stale: bool = False,
    no_cache: bool = False,
    tag: str | None = None,
    repo: Path | None = None,
    progress: Progress | None = None,
) -> BuildResult:
    """Build the ``variant`` image reproducibly and return its identity.

    ``offline`` builds FROM the local Debian bootstrap base (made with mmdebstrap if needed) with
    no network; otherwise FROM the public python image pinned by digest in the Containerfile.
    ``if_stale`` returns the existing image untouched when its inputs-hash label is current.
    ``tag`` overrides the variant's standard tag (``verify`` builds under a scratch tag).
    ``offline=None`` takes the path of :func:`default_offline`.
    """
    offline = default_offline(offline)
    started = time.monotonic()
    root = repo or find_repo()
    recipe = RECIPES[variant]
    podman = _podman()
    target = tag or recipe.tag
    expected = inputs_hash(variant, offline=offline, repo=root)
    if if_stale:
        found = image_inspect(podman, target)
        labels = dict((found or {}).get("Labels") or {})
        revision = recipe_revision(root, recipe)
        if not ImageStatus(target, expected, found is not None, labels, revision).stale:
            if progress:
                progress(f"{target} is up to date (inputs {expected[:12]})")
            return _result(podman, target, built=False, started=started)
    # One context per build: prepare-host and a test may build at the same time.
    contexts = cache_dir(root) / "contexts"
    contexts.mkdir(parents=True, exist_ok=True)
    context = Path(tempfile.mkdtemp(prefix=f"{variant}-", dir=contexts))
    try:
        return _build_in(root, recipe, context, target, expected, offline, no_cache, progress)
    finally:
        shutil.rmtree(context, ignore_errors=True)


def _build_in(
    root: Path,
    recipe: Recipe,
    context: Path,
    target: str,
    expected: str,
    offline: bool,
    no_cache: bool,
    progress: Progress | None,
) -> BuildResult:
    started = time.monotonic()
    podman = _podman()
    variant = recipe.variant
    revision, epoch = recipe_revision(root, recipe), build_epoch()
    _copy_context(root, recipe, context)
    args, labels = _build_args(
        root,
        recipe,
        context,
        offline=offline,
        expected=expected,
        revision=revision,
        progress=progress,
        podman=podman,
    )
    append_labels(context / "Containerfile", labels)
    argv = [
        podman,
        "build",
        f"--file={context / 'Containerfile'}",
        f"--tag={target}",
        f"--timestamp={epoch}",
        # buildah's own version label would tie the digest to the podman release.
        "--identity-label=false",
        # Only the normal path's base image may be pulled; everything else is local.
        "--pull=never" if offline else "--pull=missing",
        *(["--network=none"] if offline else []),
        *(["--no-cache"] if no_cache else []),
        *(f"--build-arg={k}={v}" for k, v in sorted(args.items())),
        str(context),
    ]
    if progress:
        progress(f"building {target} ({variant}, {'offline' if offline else 'normal'} path)")
    previous = image_inspect(podman, target)
    try:
        run_streamed(argv, progress=progress, what=f"podman build of {target}")
    except BuildFailed as exc:
        if not offline:
            raise BuildFailed(f"{exc}\n(no registry reachable? build with --offline)") from exc
        raise
    result = _result(podman, target, built=True, started=started)
    if previous and f"sha256:{previous['Id']}" != result.image_id:
        # The replaced image may now be untagged: remove it, so repeated rebuilds do not pile up
        # old images - unless another name still points at it (a user's own tag: `podman rmi`
        # by ID would drop that name too) or a container uses it (podman refuses then).
        still = image_inspect(podman, previous["Id"])
        if still is not None and not still.get("RepoTags"):
            subprocess.run([podman, "rmi", previous["Id"]], capture_output=True, check=False)
    return result


def verify(
    variant: Variant = "standard",
    *,
    offline: bool | None = None,
    repo: Path | None = None,
    tag: str | None = None,
    progress: Progress | None = None,
) -> BuildResult:
    """Rebuild the image from scratch under a scratch tag and compare it with the tagged one
    (the variant's tag, or ``tag``).

    Builds the tagged image first if it is missing or stale. Raises :class:`DigestMismatch`
    naming both IDs when the rebuild differs; returns the (identical) result otherwise.
    """
    offline = default_offline(offline)
    reference = build(
        variant, offline=offline, if_stale=True, tag=tag, repo=repo, progress=progress
    )
    scratch = f"{tag or RECIPES[variant].tag}-verify"
    try:
        again = build(
            variant, offline=offline, no_cache=True, tag=scratch, repo=repo, progress=progress
        )
    finally:
        # Untag only: when the build reproduced, the scratch tag names the reference image.
        subprocess.run([_podman(), "untag", scratch, scratch], capture_output=True, check=False)
    if again.image_id != reference.image_id:
        subprocess.run([_podman(), "rmi", again.image_id], capture_output=True, check=False)
        raise DigestMismatch(
            f"{reference.tag} is {reference.image_id} but a rebuild from the same inputs gave "
            f"{again.image_id}: the build is not reproducible ({_differences(reference, again)})"
        )
    return reference


def _differences(first: BuildResult, second: BuildResult) -> str:
    """Say where two builds differ: which layers (1 = base), which labels."""
    found = []
    if first.labels.get(LABEL_INPUTS_HASH) != second.labels.get(LABEL_INPUTS_HASH):
        found.append("the inputs changed while verifying: retry when no one edits the sources")
    layers = [
        str(index)
        for index, (a, b) in enumerate(zip(first.layers, second.layers, strict=False), 1)
        if a != b
    ]
    if len(first.layers) != len(second.layers):
        found.append(f"{len(first.layers)} vs {len(second.layers)} layers")
    if layers:
        found.append(f"layers {', '.join(layers)} of {len(first.layers)} differ")
    labels = sorted(
        k for k in {*first.labels, *second.labels} if first.labels.get(k) != second.labels.get(k)
    )
    if labels:
        found.append(f"labels differ: {', '.join(labels)}")
    return "; ".join(found) or "same layers and labels: the image config differs"
