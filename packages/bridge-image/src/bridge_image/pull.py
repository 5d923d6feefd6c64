"""Pull a released image by digest, verifying its signature, into podman's image store.

skopeo (from the containers project, like podman) copies ``registry/path@sha256:...`` into
``containers-storage:`` with a private policy that requires a signature by the release key
(:mod:`bridge_image._trust`): an unsigned image, a signature by another key, a signature made
for another digest, or a manifest that does not hash to the pinned digest is refused before
anything is tagged. The local names are added only after the stored image's digest was checked.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bridge_image._run import Progress, image_inspect, require_tool, run_streamed
from bridge_image._trust import tls_verify, write_trust
from bridge_image.errors import BuildFailed, PullRefused
from bridge_image.release import PublishedImage, Release, repository_of

__all__ = ["PULL_TIMEOUT", "SKOPEO_HINT", "PulledImage", "image_present", "pull_released"]

SKOPEO_HINT = "install skopeo (apt-get install skopeo; it comes with podman on most systems)"
_PODMAN_HINT = "install podman (apt-get install podman)"
PULL_TIMEOUT = 1800.0
"""Bound on one pull (a 1 GB image over a slow link); past it skopeo is killed, nothing tagged."""
_LINE_CHARS = 300
_TAIL = 8

# What skopeo (containers/image) says, and what it means for the user.
_CAUSES = (
    ("signature was required, but no signature exists", "the image is NOT signed"),
    ("not signed by", "the image's signature is not by the release key"),
    ("invalid GPG signature", "the image's signature is not by the release key"),
    ("does not match", "the image does not match its signature or pinned digest (tampered?)"),
    ("Digest did not match", "the registry served content that does not match its digest"),
    ("manifest unknown", "the registry does not have this digest"),
    ("connection refused", "the registry is not reachable"),
    ("no such host", "the registry's host name does not resolve"),
)


@dataclass(frozen=True, slots=True)
class PulledImage:
    published: PublishedImage
    names: tuple[str, ...]
    """The local names now pointing at it (the reference, the requested name)."""
    image_id: str


def image_present(name: str) -> bool:
    """Whether podman's image store has ``name``."""
    return image_inspect(require_tool("podman", _PODMAN_HINT), name) is not None


def _explain(lines: list[str]) -> str:
    text = "\n".join(lines)
    causes = sorted({meaning for needle, meaning in _CAUSES if needle.lower() in text.lower()})
    # The registry's words are not trusted: short, last lines only.
    tail = "\n".join(line[:_LINE_CHARS] for line in lines[-_TAIL:])
    return f"{'; '.join(causes) or 'the copy failed'}\n{tail}"


def pull_released(image: str, release: Release, *, progress: Progress | None = None) -> PulledImage:
    """Pull the image ``image`` names in ``release`` by digest, verified, and tag it ``image``.

    Raises :class:`PullRefused` (nothing tagged) when the image is not in the release, the
    release has no signing key, or the registry's image fails the signature or digest check.
    """
    published = release.find(image)
    if published is None:
        known = ", ".join(sorted(release.images)) or "none"
        raise PullRefused(
            f"{image} is not an image of release {release.version} (it lists: {known}): build "
            "it (mcp-code-execution-mode image build) or set MCP_BRIDGE_IMAGE to a released one"
        )
    if release.signature is None:
        raise PullRefused(
            f"the release record of {release.version} names no signing key: images are only "
            "pulled with a verified signature; build the image locally instead "
            "(mcp-code-execution-mode image build)"
        )
    skopeo = require_tool("skopeo", SKOPEO_HINT)
    podman = require_tool("podman", _PODMAN_HINT)
    repository = repository_of(published.reference)
    if progress:
        progress(f"pulling {published.pinned} (signed by {release.signature.fingerprint})")
    with tempfile.TemporaryDirectory(prefix="bridge-image-trust-") as scratch:
        trust = write_trust(
            Path(scratch),
            [repository],
            public_key=release.signature.public_key,
            lookaside=release.signature.lookaside,
        )
        argv = [
            skopeo,
            "copy",
            *trust.arguments(),
            f"--src-tls-verify={str(tls_verify(published.reference)).lower()}",
            f"docker://{published.pinned}",
            f"containers-storage:{published.reference}",
        ]
        try:
            run_streamed(
                argv, progress=progress, what=f"pull of {published.pinned}", timeout=PULL_TIMEOUT
            )
        except BuildFailed as exc:
            lines = str(exc).splitlines()[1:]
            raise PullRefused(
                f"refused {published.pinned} (release {release.version}): {_explain(lines)}\n"
                "nothing was tagged; check the registry, or build an image under a name of "
                "your own (mcp-code-execution-mode image build --tag localhost/my-sandbox:1) "
                "and set MCP_BRIDGE_IMAGE to it"
            ) from None
    found = image_inspect(podman, published.reference)
    digests = set((found or {}).get("RepoDigests") or ())
    stored_id = f"sha256:{str((found or {}).get('Id', '')).removeprefix('sha256:')}"
    if (
        found is None
        or published.pinned not in digests
        or published.config not in {None, stored_id}
    ):
        # skopeo checked the digest already; this guards the store against a race with
        # another pull of the same name.
        # `podman untag IMAGE` alone would drop EVERY name of the image: name the one to drop.
        name = published.reference
        subprocess.run([podman, "untag", name, name], capture_output=True, check=False)
        raise PullRefused(
            f"after pulling {published.pinned}, {published.reference} in the image store has "
            f"digests {sorted(digests)[:4]} and ID {stored_id}: refusing it"
        )
    names = [published.reference]
    if image not in {published.reference, published.pinned}:
        image_id = str(found.get("Id", ""))
        subprocess.run([podman, "tag", image_id, image], check=True, capture_output=True)
        names.append(image)
    if progress:
        progress(f"pulled {published.pinned}: digest and signature verified; tagged {image}")
    return PulledImage(published, tuple(names), str(found.get("Id", "")))
