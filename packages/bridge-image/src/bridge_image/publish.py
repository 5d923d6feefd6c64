"""``bridge-image release``: build the images, push them, sign them, record their digests.

Each variant is built reproducibly (skipped when current), pushed with skopeo to
``<registry>/<title>:<version>``, signed with GPG "simple signing" (the signature goes to the
lookaside store, which is published next to the registry), and its pushed manifest digest is
written into the release record (:mod:`bridge_image.release`): the package of that release knows
which digest to pull and which key must have signed it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bridge_image import builder
from bridge_image._recipes import RECIPES, Variant
from bridge_image._run import Progress, image_inspect, require_tool, run_streamed
from bridge_image._trust import tls_verify, write_trust
from bridge_image.errors import BuildFailed, MissingInput, PublishFailed
from bridge_image.names import IMAGE_VERSION
from bridge_image.pull import SKOPEO_HINT
from bridge_image.release import (
    PublishedImage,
    Release,
    SigningKey,
    load_release,
    repository_of,
    write_release,
)

__all__ = ["REGISTRY_ENV", "publish"]

REGISTRY_ENV = "BRIDGE_IMAGE_REGISTRY"
"""The registry and namespace ``release`` pushes to, e.g. ``ghcr.io/acme`` (``--registry``)."""

_REGISTRY = re.compile(r"[a-z0-9.-]+(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _public_key(fingerprint: str) -> str:
    """The armored public key of ``fingerprint`` from the signer's GPG keyring ($GNUPGHOME)."""
    gpg = require_tool("gpg", "install gnupg (apt-get install gnupg)")
    done = subprocess.run(
        [gpg, "--batch", "--export", "--armor", fingerprint],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or "BEGIN PGP PUBLIC KEY BLOCK" not in done.stdout:
        raise PublishFailed(
            f"gpg has no public key {fingerprint} in its keyring ($GNUPGHOME): "
            f"{done.stderr.strip()[:300]}"
        )
    return done.stdout


def _fingerprint(key_id: str) -> str:
    gpg = require_tool("gpg", "install gnupg (apt-get install gnupg)")
    done = subprocess.run(
        [gpg, "--batch", "--with-colons", "--list-secret-keys", key_id],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("fpr:"):
            return line.split(":")[9]
    raise PublishFailed(f"gpg has no secret key {key_id!r} to sign with ($GNUPGHOME)")


def _pushed_config(skopeo: str, reference: str, digest: str) -> str:
    """The config digest (image ID) of the manifest just pushed, read back from the registry.

    The manifest must hash to ``digest``: the record pairs the two, and a pull checks both.
    """
    pinned = f"{repository_of(reference)}@{digest}"
    done = subprocess.run(
        [
            skopeo,
            "inspect",
            "--raw",
            f"--tls-verify={str(tls_verify(reference)).lower()}",
            f"docker://{pinned}",
        ],
        capture_output=True,
        check=False,
    )
    raw = done.stdout
    if done.returncode != 0 or f"sha256:{hashlib.sha256(raw).hexdigest()}" != digest:
        raise PublishFailed(
            f"the registry does not give back the manifest {pinned} just pushed: "
            f"{done.stderr.decode(errors='replace').strip()[-300:]}"
        )
    try:
        config = json.loads(raw)["config"]["digest"]
    except (ValueError, KeyError, TypeError):
        config = None
    if not isinstance(config, str) or _DIGEST.fullmatch(config) is None:
        raise PublishFailed(f"{pinned} is not a single-image manifest with a config digest")
    return config


def publish(
    variants: Sequence[Variant],
    *,
    registry: str,
    sign_by: str | None,
    lookaside: str,
    staging: str | None = None,
    passphrase_file: Path | None = None,
    tags: dict[Variant, str] | None = None,
    build: bool = True,
    offline: bool | None = None,
    record: Path | None = None,
    progress: Progress | None = None,
) -> Release:
    """Build (unless ``build`` is False), push and sign ``variants``; write and return the record.

    ``tags`` names the local image of a variant (default: its standard tag). ``sign_by`` None
    pushes unsigned images (the record then has no key, and the bridge will not pull them).
    """
    if _REGISTRY.fullmatch(registry) is None:
        raise PublishFailed(
            f"--registry {registry!r} is not a registry[:port][/namespace] name (lower-case)"
        )
    skopeo = require_tool("skopeo", SKOPEO_HINT)
    podman = require_tool("podman", "install podman (apt-get install podman)")
    tags = tags or {}
    fingerprint = _fingerprint(sign_by) if sign_by else None
    images: dict[str, PublishedImage] = {}
    for variant in variants:
        recipe = RECIPES[variant]
        local = tags.get(variant, recipe.tag)
        if build:
            builder.build(variant, offline=offline, if_stale=True, tag=local, progress=progress)
        elif image_inspect(podman, local) is None:
            raise MissingInput(f"{local} is not in the image store (build it, or drop --no-build)")
        reference = f"{registry}/{recipe.title}:{IMAGE_VERSION}"
        with tempfile.TemporaryDirectory(prefix="bridge-image-push-") as scratch:
            trust = write_trust(
                Path(scratch),
                [repository_of(reference)],
                public_key=None,
                lookaside=lookaside,
                staging=staging,
            )
            digest_file = Path(scratch) / "digest"
            argv = [
                skopeo,
                "copy",
                *trust.arguments(),
                f"--dest-tls-verify={str(tls_verify(reference)).lower()}",
                f"--digestfile={digest_file}",
                # A pulled image keeps its signatures in the store; they name another reference.
                "--remove-signatures",
                *([f"--sign-by={fingerprint}"] if fingerprint else []),
                *([f"--sign-passphrase-file={passphrase_file}"] if passphrase_file else []),
                f"containers-storage:{local}",
                f"docker://{reference}",
            ]
            if progress:
                progress(f"pushing {local} to {reference}" + (" (signing)" if fingerprint else ""))
            try:
                run_streamed(argv, progress=progress, what=f"push of {local} to {reference}")
            except BuildFailed as exc:
                raise PublishFailed(str(exc)) from None
            digest = digest_file.read_text().strip()
        if _DIGEST.fullmatch(digest) is None:
            raise PublishFailed(f"skopeo reported no manifest digest for {reference}: {digest!r}")
        images[local] = PublishedImage(
            variant=variant,
            reference=reference,
            digest=digest,
            config=_pushed_config(skopeo, reference, digest),
        )
        if progress:
            progress(f"published {reference}@{digest}")
    signature = None
    if fingerprint:
        signature = SigningKey(fingerprint, _public_key(fingerprint), lookaside)
    # Releasing one variant keeps the others already recorded for this version.
    earlier = load_release(record)
    if earlier is not None and (earlier.version, earlier.signature) == (IMAGE_VERSION, signature):
        images = {**earlier.images, **images}
    release = Release(version=IMAGE_VERSION, images=images, signature=signature)
    where = write_release(release, record)
    if progress:
        progress(f"release record written to {where}")
    return release
