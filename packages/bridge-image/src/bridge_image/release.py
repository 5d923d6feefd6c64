"""The release record: which published image, pinned by digest and signed by which key, each
local image name stands for.

``bridge-image release`` writes it (by default :data:`PACKAGED_RECORD`, next to this module, so
the wheel of a release carries the digests of the images released with it); the pull on first
use reads it. The file can come from anywhere a user points ``[image] release`` at, so
it is parsed as untrusted input: bounded, every field checked, unknown fields refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge_image._openpgp import KeyBlockError, primary_fingerprints
from bridge_image.errors import ReleaseRecordError

__all__ = [
    "PACKAGED_RECORD",
    "PublishedImage",
    "Release",
    "SigningKey",
    "load_release",
    "repository_of",
    "write_release",
]

PACKAGED_RECORD = Path(__file__).resolve().parent / "release.json"
"""The record of the release this package belongs to (absent until images are published)."""

FORMAT = 1
_MAX_RECORD_BYTES = 256 * 1024
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# registry[:port]/path:tag, lower-case path components as the distribution spec requires.
_REFERENCE = re.compile(
    r"(?P<repo>[a-z0-9.-]+(?::[0-9]{1,5})?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+)"
    r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})"
)
_LOCAL_NAME = re.compile(r"[a-z0-9.:/_-]{1,255}")
_FINGERPRINT = re.compile(r"[0-9A-F]{40}")
_LOOKASIDE = re.compile(r"(file|https?)://\S{1,1000}")


@dataclass(frozen=True, slots=True)
class PublishedImage:
    """One pushed image: where it is (``reference``, with its tag) and what it is (``digest``)."""

    variant: str
    reference: str
    """``registry/path:tag`` as pushed."""
    digest: str
    """``sha256:`` of the pushed manifest: what a pull asks for, and checks."""
    config: str | None = None
    """``sha256:`` of the image's config, which is its image ID in podman and in docker (and
    names every layer by content). Unlike the manifest digest it survives ``podman save |
    docker load`` and a bit-for-bit reproduced local build, so an image already present can be
    matched by it on either engine. None in records written before it was recorded."""

    @property
    def pinned(self) -> str:
        """``registry/path@sha256:...``: the reference a pull uses, immune to a moved tag."""
        return f"{repository_of(self.reference)}@{self.digest}"


@dataclass(frozen=True, slots=True)
class SigningKey:
    """The key the release's images are signed with (containers "simple signing", GPG)."""

    fingerprint: str
    public_key: str
    """ASCII-armored OpenPGP public key: the only key a pull accepts signatures from."""
    lookaside: str
    """Where the signatures are published (``https://`` or ``file://``): a registry stores
    none of them itself."""


@dataclass(frozen=True, slots=True)
class Release:
    """A release record: version, images by local name, signing key."""

    version: str
    images: dict[str, PublishedImage] = field(default_factory=dict)
    signature: SigningKey | None = None

    def find(self, image: str) -> PublishedImage | None:
        """The published image ``image`` names: a local name, its reference or its pin, also
        spelled as an engine reads it to the same image (:func:`engine_spelling`)."""
        for spelled in dict.fromkeys((image, engine_spelling(image))):
            if spelled in self.images:
                return self.images[spelled]
            for published in self.images.values():
                if spelled in {published.reference, published.pinned}:
                    return published
        return None

    def local_name(self, image: str) -> str | None:
        """The record's local name for ``image`` (see :meth:`find`), if it is one."""
        for spelled in (image, engine_spelling(image)):
            if spelled in self.images:
                return spelled
        return None


def engine_spelling(image: str) -> str:
    """``image`` as an engine's store spells the name it runs: a name without a registry (no
    ``.``, ``:``, capitals or ``localhost`` in its first part) is podman's local
    ``localhost/...`` one,
    and a registry's host name is case-insensitive (``GHCR.IO`` is ``ghcr.io``). A name that
    looks released but is spelled otherwise must be checked as the released one, not run as an
    unknown tag."""
    first, slash, rest = image.partition("/")
    if not slash or (
        "." not in first and ":" not in first and first != "localhost" and first == first.lower()
    ):
        return f"localhost/{image}"
    return f"{first.lower()}/{rest}"


def repository_of(reference: str) -> str:
    """``registry/path`` of ``registry/path:tag`` (a port's colon is not a tag's)."""
    found = _REFERENCE.fullmatch(reference)
    if found is None:
        raise ReleaseRecordError(
            f"{reference!r} is not a registry/path:tag image reference (lower-case path)"
        )
    return found["repo"]


def _text(raw: dict[str, Any], key: str, where: str, pattern: re.Pattern[str]) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        shown = repr(value)[:80]
        raise ReleaseRecordError(f"{where}: {key} is missing or malformed ({shown})")
    return value


def _only(raw: dict[str, Any], keys: set[str], where: str) -> None:
    extra = sorted(set(raw) - keys)
    if extra:
        raise ReleaseRecordError(f"{where}: unknown field(s) {', '.join(extra)[:200]}")


def _parse(raw: Any, where: str) -> Release:
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ReleaseRecordError(f"{where}: not a release record of format {FORMAT}")
    _only(raw, {"format", "version", "images", "signature"}, where)
    version = _text(raw, "version", where, re.compile(r"[0-9A-Za-z.+-]{1,64}"))
    images: dict[str, PublishedImage] = {}
    listed = raw.get("images")
    if not isinstance(listed, dict) or len(listed) > 64:
        raise ReleaseRecordError(f"{where}: images must be an object of at most 64 entries")
    for name, entry in listed.items():
        if not isinstance(name, str) or _LOCAL_NAME.fullmatch(name) is None:
            raise ReleaseRecordError(f"{where}: bad local image name {str(name)[:80]!r}")
        if not isinstance(entry, dict):
            raise ReleaseRecordError(f"{where}: images[{name!r}] is not an object")
        at = f"{where}: images[{name!r}]"
        _only(entry, {"variant", "reference", "digest", "config"}, at)
        reference = _text(entry, "reference", at, _REFERENCE)
        images[name] = PublishedImage(
            variant=_text(entry, "variant", at, re.compile(r"[a-z0-9-]{1,32}")),
            reference=reference,
            digest=_text(entry, "digest", at, _DIGEST),
            config=_text(entry, "config", at, _DIGEST) if "config" in entry else None,
        )
    signature = None
    signed = raw.get("signature")
    if signed is not None:
        at = f"{where}: signature"
        if not isinstance(signed, dict):
            raise ReleaseRecordError(f"{at} is not an object")
        _only(signed, {"type", "fingerprint", "public_key", "lookaside"}, at)
        if signed.get("type") != "simple-signing":
            raise ReleaseRecordError(f"{at}: type must be simple-signing")
        key = signed.get("public_key")
        if not isinstance(key, str) or "BEGIN PGP PUBLIC KEY BLOCK" not in key or len(key) > 64_000:
            raise ReleaseRecordError(f"{at}: public_key is not an armored OpenPGP public key")
        fingerprint = _text(signed, "fingerprint", at, _FINGERPRINT)
        try:
            held = primary_fingerprints(key)
        except KeyBlockError as exc:
            raise ReleaseRecordError(f"{at}: public_key cannot be read: {exc}") from None
        if held != [fingerprint]:
            # The pull trusts any key of the block: it must be exactly the one the record names.
            raise ReleaseRecordError(
                f"{at}: public_key holds the key(s) {held or 'none'}, not exactly the key "
                f"{fingerprint} the record names as the signer"
            )
        signature = SigningKey(
            fingerprint=fingerprint,
            public_key=key,
            lookaside=_text(signed, "lookaside", at, _LOOKASIDE),
        )
    return Release(version=version, images=images, signature=signature)


def load_release(path: Path | None = None) -> Release | None:
    """The release record at ``path`` (default :data:`PACKAGED_RECORD`); None if there is none.

    Raises :class:`ReleaseRecordError` naming the file and the field for anything malformed.
    """
    path = path or PACKAGED_RECORD
    try:
        with path.open("rb") as file:
            data = file.read(_MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReleaseRecordError(f"cannot read the release record {path}: {exc}") from exc
    if len(data) > _MAX_RECORD_BYTES:
        raise ReleaseRecordError(f"{path}: larger than {_MAX_RECORD_BYTES} bytes")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReleaseRecordError(f"{path} is not JSON: {exc}") from exc
    return _parse(raw, str(path))


def _entry(published: PublishedImage) -> dict[str, str]:
    entry = {
        "variant": published.variant,
        "reference": published.reference,
        "digest": published.digest,
    }
    if published.config is not None:
        entry["config"] = published.config
    return entry


def write_release(release: Release, path: Path | None = None) -> Path:
    """Write ``release`` to ``path`` (default :data:`PACKAGED_RECORD`); return the path."""
    path = path or PACKAGED_RECORD
    raw: dict[str, Any] = {
        "format": FORMAT,
        "version": release.version,
        "images": {name: _entry(p) for name, p in sorted(release.images.items())},
    }
    if release.signature is not None:
        raw["signature"] = {
            "type": "simple-signing",
            "fingerprint": release.signature.fingerprint,
            "public_key": release.signature.public_key,
            "lookaside": release.signature.lookaside,
        }
    _parse(raw, str(path))  # what is written must read back
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=2) + "\n")
    return path
